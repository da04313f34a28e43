// CPU kernel of _foreach_copy_: the pairs' bytes as one range, split over the threads, so a list
// of small tensors is copied as fast as one large one.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ember/core/ops/foreach.h"
#include "ember/core/parallel.h"

namespace ember {
namespace {

constexpr int64_t kGrainBytes = int64_t{1} << 18;

void foreach_copy_cpu(ArrayRef<Tensor> self, ArrayRef<Tensor> src) {
  std::vector<int64_t> ends;  // where each pair's bytes end in the joined range
  int64_t total = 0;
  for (const Tensor& t : self) ends.push_back(total += static_cast<int64_t>(t.nbytes()));
  parallel_for(0, total, kGrainBytes, [&](int64_t b, int64_t e) {
    size_t i = std::upper_bound(ends.begin(), ends.end(), b) - ends.begin();
    for (; b < e; ++i) {
      const int64_t start = ends[i] - static_cast<int64_t>(self[i].nbytes()), stop = std::min(e, ends[i]);
      std::memmove(static_cast<char*>(self[i].data_ptr()) + (b - start),
                   static_cast<const char*>(src[i].data_ptr()) + (b - start), static_cast<size_t>(stop - b));
      b = stop;
    }
  });
}

KernelRegistrar<ForeachCopyFn> reg(foreach_copy_stub, kCPU, &foreach_copy_cpu);

}  // namespace
}  // namespace ember
