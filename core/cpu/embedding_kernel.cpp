// CPU embedding: validate every index, then copy rows (dtype-agnostic memcpy).
#include <cstring>

#include "ember/core/ops/embedding.h"
#include "ember/core/parallel.h"

namespace ember::cpu {
namespace {

template <class I>
void gather_rows(const Tensor& out, const Tensor& weight, const I* idx, int64_t n) {
  int64_t V = weight.size(0);
  for (int64_t i = 0; i < n; ++i)
    EMBER_CHECK(idx[i] >= 0 && idx[i] < V, "embedding: index ", static_cast<int64_t>(idx[i]),
                " is out of range for a weight with ", V, " rows (num_embeddings)");
  auto es = static_cast<int64_t>(weight.element_size());
  size_t row_bytes = static_cast<size_t>(weight.size(1) * es);
  if (row_bytes == 0) return;
  int64_t row_stride = weight.stride(0) * es;
  const char* src = static_cast<const char*>(weight.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  int64_t grain =
      std::max<int64_t>(1, 65536 / std::max<int64_t>(static_cast<int64_t>(row_bytes), 1));
  parallel_for(0, n, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      std::memcpy(dst + i * static_cast<int64_t>(row_bytes),
                  src + static_cast<int64_t>(idx[i]) * row_stride, row_bytes);
  });
}

void embedding_kernel(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  if (indices.dtype() == kInt32)
    gather_rows(out, weight, indices.data_ptr<int32_t>(), indices.numel());
  else
    gather_rows(out, weight, indices.data_ptr<int64_t>(), indices.numel());
}

KernelRegistrar<EmbeddingFn> reg(embedding_stub, kCPU, &embedding_kernel);

}  // namespace
}  // namespace ember::cpu
