#include "ember/text/wordpiece_tokenizer.h"

#include "ember/core/error.h"

namespace ember::text {

WordpieceTokenizer::WordpieceTokenizer(Vocab vocab, std::string_view unk_token,
                                       int64_t max_input_chars_per_word)
    : vocab_(std::move(vocab)), max_input_chars_per_word_(max_input_chars_per_word) {
  std::optional<int64_t> unk = vocab_.find(unk_token);
  EMBER_CHECK(unk, "WordpieceTokenizer: ", vocab_.source(), " has no unknown token '", unk_token, "'");
  unk_id_ = *unk;
}

void WordpieceTokenizer::tokenize(std::string_view word, std::vector<int64_t>& out) const {
  // Byte offsets of the code points, and the end: pieces are cut between code points.
  std::vector<size_t> bounds;
  for (size_t i = 0; i < word.size(); ++i) {
    if ((static_cast<unsigned char>(word[i]) & 0xC0) != 0x80) bounds.push_back(i);
  }
  const size_t chars = bounds.size();
  bounds.push_back(word.size());
  if (static_cast<int64_t>(chars) > max_input_chars_per_word_) {
    out.push_back(unk_id_);
    return;
  }
  const size_t first = out.size();
  std::string piece;
  for (size_t start = 0; start < chars;) {
    size_t end = chars;
    std::optional<int64_t> id;
    for (; end > start; --end) {
      piece.assign(start > 0 ? "##" : "");
      piece.append(word.substr(bounds[start], bounds[end] - bounds[start]));
      if ((id = vocab_.find(piece))) break;
    }
    if (!id) {
      out.resize(first);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(*id);
    start = end;
  }
}

}  // namespace ember::text
