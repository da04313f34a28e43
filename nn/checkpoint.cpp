#include "ember/nn/checkpoint.h"

namespace ember::nn {

Tensor checkpoint_sequential(const Sequential& sequential, int64_t segments, const Tensor& input,
                             autograd::CheckpointOptions options) {
  EMBER_CHECK(sequential, "checkpoint_sequential: the Sequential is empty (a null holder)");
  std::shared_ptr<SequentialImpl> seq = sequential.ptr();
  int64_t n = static_cast<int64_t>(seq->size());
  EMBER_CHECK(segments >= 1 && segments <= n,
              "checkpoint_sequential: segments must be between 1 and the number ", "of modules (", n,
              "), got ", segments);
  size_t segment_size = static_cast<size_t>(n / segments);
  Tensor x = input;
  size_t begin = 0;
  for (int64_t s = 0; s + 1 < segments; ++s, begin += segment_size) {
    size_t end = begin + segment_size;
    x = autograd::checkpoint([seq, begin, end](const Tensor& t) { return seq->forward_range(t, begin, end); },
                             x, options);
  }
  return seq->forward_range(x, begin, seq->size());
}

}  // namespace ember::nn
