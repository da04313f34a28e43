#include "ember/nn/pad_sequence.h"

#include <algorithm>

#include "ember/core/ops/shape_ops.h"

namespace ember::nn::utils::rnn {

Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first, double padding_value,
                    const std::string& padding_side) {
  constexpr const char* kOp = "pad_sequence";
  EMBER_CHECK(!sequences.empty(), kOp, ": got no sequences");
  EMBER_CHECK(padding_side == "right" || padding_side == "left", kOp,
              ": padding_side must be \"right\" or \"left\", got \"", padding_side, "\"");
  const Tensor& first = sequences[0];
  auto trailing = [](const Tensor& t) {
    return std::vector<int64_t>(t.sizes().begin() + 1, t.sizes().end());
  };
  int64_t longest = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Tensor& s = sequences[i];
    EMBER_CHECK(s.defined() && s.dim() >= 1, kOp, ": sequence ", i, " must have at least one dim, got ",
                s.defined() ? ember::detail::str_cat(s.sizes()) : std::string("an undefined tensor"));
    EMBER_CHECK(trailing(s) == trailing(first) && s.dtype() == first.dtype() && s.device() == first.device(),
                kOp, ": sequence ", i, " is ", s.dtype(), " ", s.sizes(), " on ", s.device(),
                ", sequence 0 is ", first.dtype(), " ", first.sizes(), " on ", first.device(),
                " (all need the same trailing dims, dtype and device)");
    longest = std::max(longest, s.size(0));
  }
  std::vector<Tensor> padded;
  for (const Tensor& s : sequences) {
    // pad's list runs from the last dim to the first: dim 0's pair comes last.
    std::vector<int64_t> widths(2 * static_cast<size_t>(s.dim()), 0);
    widths[widths.size() - (padding_side == "left" ? 2 : 1)] = longest - s.size(0);
    padded.push_back(pad(s, widths, "constant", padding_value));
  }
  return stack(padded, batch_first ? 0 : 1);
}

}  // namespace ember::nn::utils::rnn
