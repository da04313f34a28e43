#include "ember/text/vocab.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "ember/core/error.h"
#include "ember/text/utf8.h"

namespace ember::text {

namespace {

// Names a token in a message; control characters and the like would garble the terminal.
std::string quoted(const std::string& token) {
  std::string out = "'";
  for (unsigned char c : token) {
    if (c < 0x20 || c == 0x7F) {
      out += detail::str_cat("\\x", "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out + "'";
}

}  // namespace

Vocab Vocab::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in, "Vocab: cannot open ", path, ": ", std::strerror(errno));
  std::vector<std::string> tokens;
  for (std::string line; std::getline(in, line);) {
    EMBER_CHECK(is_valid_utf8(line), "Vocab: ", path, ":", tokens.size() + 1, ": invalid UTF-8");
    tokens.push_back(std::move(line));
  }
  EMBER_CHECK(!in.bad(), "Vocab: cannot read ", path, ": ", std::strerror(errno));
  return Vocab(std::move(tokens), path);
}

Vocab::Vocab(std::vector<std::string> tokens, std::string source)
    : tokens_(std::move(tokens)), source_(std::move(source)) {
  ids_.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    auto [it, inserted] = ids_.emplace(tokens_[i], static_cast<int64_t>(i));
    EMBER_CHECK(inserted, "Vocab: ", source_, ":", i + 1, ": token ", quoted(tokens_[i]), " repeats line ",
                it->second + 1);
  }
}

std::optional<int64_t> Vocab::find(std::string_view token) const {
  auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string& Vocab::token(int64_t id) const {
  EMBER_CHECK(id >= 0 && id < size(), "Vocab: id ", id, " out of range [0, ", size(), ") of ", source_);
  return tokens_[static_cast<size_t>(id)];
}

}  // namespace ember::text
