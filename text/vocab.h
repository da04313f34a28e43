#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ember::text {

// A WordPiece vocabulary: token i is line i (from 0) of vocab.txt, as Hugging Face's load_vocab
// reads it (only the "\n" is cut, so an empty line is the token ""). Tokens are distinct.
class Vocab {
 public:
  // Throws ember::Error naming the file (and line) when it cannot be read, holds invalid UTF-8,
  // or repeats a token.
  static Vocab from_file(const std::string& path);
  // `source` names the tokens' origin in errors ("vocab.txt").
  explicit Vocab(std::vector<std::string> tokens, std::string source = "vocab");

  std::optional<int64_t> find(std::string_view token) const;
  const std::string& token(int64_t id) const;
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  // Where the tokens came from, for errors: a path or the constructor's `source`.
  const std::string& source() const { return source_; }

 private:
  // Lookups by string_view without building a std::string (C++20 heterogeneous lookup).
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t, Hash, std::equal_to<>> ids_;
  std::string source_;
};

}  // namespace ember::text
