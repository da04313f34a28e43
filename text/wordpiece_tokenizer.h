#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ember/text/vocab.h"

namespace ember::text {

// Hugging Face's WordpieceTokenizer: greedy longest-match-first. A word becomes its longest
// prefix in the vocabulary, then the longest "##"-prefixed continuations; a word with a part no
// entry matches, or longer than max_input_chars_per_word code points, becomes unk_token.
class WordpieceTokenizer {
 public:
  // Throws ember::Error naming the vocab's file when unk_token is not in it.
  WordpieceTokenizer(Vocab vocab, std::string_view unk_token, int64_t max_input_chars_per_word = 100);

  // Appends the ids of `word` (UTF-8, no whitespace) to `out`.
  void tokenize(std::string_view word, std::vector<int64_t>& out) const;

  const Vocab& vocab() const { return vocab_; }

 private:
  Vocab vocab_;
  int64_t unk_id_;
  int64_t max_input_chars_per_word_;
};

}  // namespace ember::text
