// CUDA graphs in a build without CUDA: nothing captures, so nothing replays.
#include "ember/cuda/graph.h"
#include "ember/cuda/no_cuda/no_cuda.h"

namespace ember::cuda {

MempoolId graph_pool_handle() { detail::throw_no_cuda("graph_pool_handle"); }
bool is_current_stream_capturing() { return false; }

CUDAGraph::~CUDAGraph() = default;
void CUDAGraph::capture_begin(MempoolId, CaptureErrorMode) {
  detail::throw_no_cuda("CUDAGraph::capture_begin");
}
void CUDAGraph::capture_end() { detail::throw_no_cuda("CUDAGraph::capture_end"); }
void CUDAGraph::replay() { detail::throw_no_cuda("CUDAGraph::replay"); }
void CUDAGraph::reset() {}

graph::graph(CUDAGraph& g, MempoolId, const Stream*, CaptureErrorMode)
    : g_(g), previous_device_(-1), previous_stream_(nullptr), uncaught_(0) {
  detail::throw_no_cuda("cuda::graph");
}
graph::~graph() noexcept(false) = default;

namespace detail {
bool capture_underway() { return false; }
}  // namespace detail

}  // namespace ember::cuda
