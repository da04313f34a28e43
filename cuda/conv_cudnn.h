#pragma once

// Convolutions on CUDA through cuDNN: the kernels of conv2d_stub, conv_transpose2d_stub and
// conv2d_weight_stub, for NCHW and channels-last (NHWC) tensors.
#include <cstdint>
#include <string>

namespace ember::cuda::cudnn {

// Whether float32 convolutions may run on TF32 tensor cores, as torch.backends.cudnn.allow_tf32.
// On by default, as in PyTorch (a float32 ResNet-50 step runs 3x faster); off, float32 results
// match the CPU's to float32 precision.
void set_allow_tf32(bool allow);
bool allow_tf32();

// Whether a convolution problem seen for the first time measures cuDNN's engines (the first few
// execution plans of the heuristic list; cudnnFind*AlgorithmEx where the legacy API runs it) and
// keeps the fastest, as torch.backends.cudnn.benchmark; off (the default, as in PyTorch), it
// takes the first of cuDNN's heuristic list whose workspace can be allocated. Either way the
// choice is cached per problem (shapes, strides, dtype, format, alignment, and this setting).
void set_benchmark(bool enabled);
bool benchmark();

// Whether convolutions keep to cuDNN's deterministic algorithms, as
// torch.backends.cudnn.deterministic (off by default). use_deterministic_algorithms(true) keeps
// them there too, whatever this says.
void set_deterministic(bool enabled);
bool deterministic();

namespace detail {
// Test hooks: how many cuDNN convolution calls ran through the backend (graph) API and how many
// through the legacy API, in this process; why the calling thread's latest call that fell back to
// the legacy API had no backend plan.
int64_t backend_calls();
int64_t legacy_calls();
std::string last_fallback_reason();
}  // namespace detail

}  // namespace ember::cuda::cudnn
