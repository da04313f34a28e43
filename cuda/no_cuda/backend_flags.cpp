// The CUDA backend's switches in a build without CUDA: kept, so that code setting them builds
// and runs the same, but nothing reads them.
#include <atomic>

#include "ember/cuda/attention_cudnn.h"
#include "ember/cuda/attention_flash.h"
#include "ember/cuda/conv_cudnn.h"
#include "ember/cuda/matmul_cublaslt.h"

namespace ember::cuda {
namespace {
std::atomic<bool> g_matmul_tf32{false}, g_tunable{false}, g_cudnn_tf32{true}, g_cudnn_benchmark{false},
    g_cudnn_deterministic{false}, g_flash{true}, g_cudnn_sdp{true};
}  // namespace

namespace matmul {
void set_allow_tf32(bool allow) { g_matmul_tf32 = allow; }
bool allow_tf32() { return g_matmul_tf32; }
}  // namespace matmul

namespace tunable {
void enable(bool enabled) { g_tunable = enabled; }
bool is_enabled() { return g_tunable; }
int64_t tuned_problems() { return 0; }
}  // namespace tunable

namespace cudnn {
void set_allow_tf32(bool allow) { g_cudnn_tf32 = allow; }
bool allow_tf32() { return g_cudnn_tf32; }
void set_benchmark(bool enabled) { g_cudnn_benchmark = enabled; }
bool benchmark() { return g_cudnn_benchmark; }
void set_deterministic(bool enabled) { g_cudnn_deterministic = enabled; }
bool deterministic() { return g_cudnn_deterministic; }
}  // namespace cudnn

void enable_flash_sdp(bool enabled) { g_flash = enabled; }
bool flash_sdp_enabled() { return g_flash; }

void enable_cudnn_sdp(bool enabled) { g_cudnn_sdp = enabled; }
bool cudnn_sdp_enabled() { return g_cudnn_sdp; }
bool cudnn_sdp_available() { return false; }
std::string cudnn_sdp_last_rejection() { return {}; }

}  // namespace ember::cuda
