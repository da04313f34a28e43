// cuDNN convolutions: conv2d is cuDNN's convolution forward, conv_transpose2d its adjoint (the
// data gradient), conv2d's weight gradient the filter gradient. All three see one geometry:
// x [N, C, Hx, Wx], weight [K, C / groups, kh, kw] and y [N, K, Hy, Wy] with y = conv(x). cuDNN
// pads both sides alike, so an asymmetric problem ("same" padding, output_padding, a backward
// whose rows do not divide evenly) runs on x and y grown at the end: with zeros where they are
// inputs, with extra rows dropped afterwards where they are outputs. Tensors packed NHWC
// (channels-last) run in that format; float64 and anything cuDNN runs in neither API in NHWC run
// NCHW.
// Each call first takes cuDNN's backend (graph) API, as PyTorch does through cudnn_frontend: a
// one-operation graph per problem, whose execution plan is chosen once and cached per thread
// (cuda/cudnn_backend.h: by default the first of heuristic mode A's list, then the fallback
// list, that finalizes, gets its workspace and runs; with cudnn::set_benchmark(true) the fastest
// of the first few). float64, and any problem no backend plan runs, take the legacy API
// (cudnnConvolutionForward / BackwardData / BackwardFilter), whose algorithm is chosen likewise
// and cached: the first of cudnnGet*Algorithm_v7's list (tensor-op math first) whose workspace
// the caching allocator can give, or with benchmark the fastest that cudnnFind*AlgorithmEx
// measures.
#include "ember/cuda/conv_cudnn.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/core/deterministic.h"
#include "ember/core/factories.h"
#include "ember/core/ops/convolution.h"
#include "ember/cuda/cudnn_backend.h"
#include "ember/cuda/cudnn_handle.h"
#include "ember/cuda/handle_pool.h"
#include "ember/cuda/plan_cache.h"

namespace ember::cuda {

namespace cudnn {
namespace {
std::atomic<bool> g_allow_tf32{true}, g_benchmark{false}, g_deterministic{false};
}  // namespace
void set_allow_tf32(bool allow) { g_allow_tf32.store(allow, std::memory_order_relaxed); }
bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }
void set_benchmark(bool enabled) { g_benchmark.store(enabled, std::memory_order_relaxed); }
bool benchmark() { return g_benchmark.load(std::memory_order_relaxed); }
void set_deterministic(bool enabled) { g_deterministic.store(enabled, std::memory_order_relaxed); }
bool deterministic() { return g_deterministic.load(std::memory_order_relaxed); }
}  // namespace cudnn

namespace {

enum class Kind : int8_t { Forward, BackwardData, BackwardFilter };

const char* op_name(Kind k) {
  switch (k) {
    case Kind::Forward:
      return "conv2d";
    case Kind::BackwardData:
      return "conv_transpose2d";
    default:
      return "conv2d (weight gradient)";
  }
}

template <class T, cudnnStatus_t (*kCreate)(T*), cudnnStatus_t (*kDestroy)(T)>
class Descriptor {
 public:
  Descriptor() { EMBER_CUDNN_CHECK(kCreate(&d_)); }
  ~Descriptor() { kDestroy(d_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  T get() const { return d_; }

 private:
  T d_ = nullptr;
};
using TensorDesc =
    Descriptor<cudnnTensorDescriptor_t, &cudnnCreateTensorDescriptor, &cudnnDestroyTensorDescriptor>;
using FilterDesc =
    Descriptor<cudnnFilterDescriptor_t, &cudnnCreateFilterDescriptor, &cudnnDestroyFilterDescriptor>;
using ConvDesc = Descriptor<cudnnConvolutionDescriptor_t, &cudnnCreateConvolutionDescriptor,
                            &cudnnDestroyConvolutionDescriptor>;

cudnnDataType_t data_type(ScalarType t) {
  switch (t) {
    case kFloat16:
      return CUDNN_DATA_HALF;
    case kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    case kFloat64:
      return CUDNN_DATA_DOUBLE;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

MemoryFormat format_of(bool nhwc) { return nhwc ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous; }

// One spatial dim's x- and y-side sizes fitted to cuDNN's geometry,
// y = (x + 2 * pad - span) / stride + 1, growing x or y (never shrinking).
std::pair<int64_t, int64_t> fit(int64_t x, int64_t y, int64_t k, int64_t pad, int64_t stride,
                                int64_t dilation) {
  const int64_t span = dilation * (k - 1) + 1;
  const int64_t num = x + 2 * pad - span;
  const int64_t c = num < 0 ? 0 : num / stride + 1;
  if (c >= y) return {x, c};
  return {(y - 1) * stride + span - 2 * pad, y};
}

// What cuDNN works on in place of t: t itself when packed in the format and of spatial size
// h x w, else a packed tensor of that size holding t's values (when `input`, zeros beyond t).
Tensor stand_in(const Tensor& t, int64_t h, int64_t w, bool nhwc, bool input) {
  if (t.is_contiguous(format_of(nhwc)) && t.size(2) == h && t.size(3) == w) return t;
  Tensor s = empty({t.size(0), t.size(1), h, w}, t.options().memory_format(format_of(nhwc)));
  if (input) {
    if (h != t.size(2) || w != t.size(3)) s.zero_();
    s.narrow(2, 0, t.size(2)).narrow(3, 0, t.size(3)).copy_(t);
  }
  return s;
}

// An algorithm with its math type and workspace size (kUnknownWorkspace until asked).
constexpr size_t kUnknownWorkspace = SIZE_MAX;
struct Choice {
  int algo;
  cudnnMathType_t math;
  size_t workspace = kUnknownWorkspace;
};

// Algorithms by everything the choice depends on (run_call's key).
constexpr size_t kProblemFields = 20;  // the problem's part of a plan cache key (plan_key)
using ConvPlans = detail::PlanCache<kProblemFields + 3, Choice>;

ConvPlans& choice_cache() {
  static auto* cache = new ConvPlans;  // leaked: used until the process ends
  return *cache;
}

// One cuDNN call: x, w, y packed in the format and fitted; `accumulate` adds to the output
// (a later batch chunk of a weight gradient); `deterministic` keeps to cuDNN's deterministic
// algorithms.
struct Call {
  Kind kind;
  const Tensor &x, &w, &y;
  const Conv2dParams& p;
  bool nhwc, accumulate, deterministic;
};

// A plan cache key: what names the problem (kind, device, dtype, format, shapes, parameters), then
// `extra`, what the cache's choice also depends on.
template <size_t N>
std::array<int64_t, kProblemFields + N> plan_key(const Call& c, const std::array<int64_t, N>& extra) {
  const Conv2dParams& p = c.p;
  const std::array<int64_t, kProblemFields> problem{static_cast<int64_t>(c.kind),
                                                    detail::current_device(),
                                                    static_cast<int64_t>(c.x.dtype()),
                                                    c.nhwc,
                                                    c.x.size(0),
                                                    c.x.size(1),
                                                    c.x.size(2),
                                                    c.x.size(3),
                                                    c.y.size(1),
                                                    c.w.size(2),
                                                    c.w.size(3),
                                                    c.y.size(2),
                                                    c.y.size(3),
                                                    p.padding[0],
                                                    p.padding[1],
                                                    p.stride[0],
                                                    p.stride[1],
                                                    p.dilation[0],
                                                    p.dilation[1],
                                                    p.groups};
  std::array<int64_t, kProblemFields + N> key{};
  std::copy(problem.begin(), problem.end(), key.begin());
  std::copy(extra.begin(), extra.end(), key.begin() + kProblemFields);
  return key;
}

struct Descs {
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
};

// cuDNN's own math mode for the dtype: no TF32 for float32 unless allowed (FMA only), tensor
// cores for half and bfloat16 (as PyTorch sets them), the default otherwise.
cudnnMathType_t default_math(ScalarType t) {
  if (t == kFloat16 || t == kBFloat16) return CUDNN_TENSOR_OP_MATH;
  if (t == kFloat32 && !cudnn::allow_tf32()) return CUDNN_FMA_MATH;
  return CUDNN_DEFAULT_MATH;
}

void describe(Descs& d, const Call& c) {
  const cudnnTensorFormat_t fmt = c.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  const ScalarType st = c.x.dtype();
  const cudnnDataType_t dt = data_type(st);
  auto i = [](int64_t v) { return static_cast<int>(v); };
  EMBER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.x.get(), fmt, dt, i(c.x.size(0)), i(c.x.size(1)),
                                               i(c.x.size(2)), i(c.x.size(3))));
  EMBER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.y.get(), fmt, dt, i(c.y.size(0)), i(c.y.size(1)),
                                               i(c.y.size(2)), i(c.y.size(3))));
  EMBER_CUDNN_CHECK(cudnnSetFilter4dDescriptor(d.w.get(), dt, fmt, i(c.w.size(0)), i(c.w.size(1)),
                                               i(c.w.size(2)), i(c.w.size(3))));
  const Conv2dParams& p = c.p;
  EMBER_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      d.conv.get(), i(p.padding[0]), i(p.padding[1]), i(p.stride[0]), i(p.stride[1]), i(p.dilation[0]),
      i(p.dilation[1]), CUDNN_CROSS_CORRELATION, st == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
  EMBER_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d.conv.get(), i(p.groups)));
  EMBER_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv.get(), default_math(st)));
}

// Whether the dtype's convolutions run on tensor cores: half and bfloat16, float32 with TF32.
bool wants_tensor_ops(ScalarType t) {
  return t == kFloat16 || t == kBFloat16 || (t == kFloat32 && cudnn::allow_tf32());
}

// The algorithms of a heuristic list or of a measurement (fastest first), in that order with the
// tensor-op ones first in a heuristic list when the dtype wants them; float32 without TF32 keeps
// the FMA ones only. A measurement also gives the workspace each used.
template <class Perf>
std::vector<Choice> keep(const Perf* perf, int n, ScalarType dt, bool measured, bool deterministic) {
  const bool fma_only = dt == kFloat32 && !cudnn::allow_tf32();
  std::vector<Choice> out;
  for (int i = 0; i < n; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && (!fma_only || perf[i].mathType == CUDNN_FMA_MATH) &&
        (!deterministic || perf[i].determinism == CUDNN_DETERMINISTIC))
      out.push_back(
          {static_cast<int>(perf[i].algo), perf[i].mathType, measured ? perf[i].memory : kUnknownWorkspace});
  if (!measured && wants_tensor_ops(dt))
    std::stable_partition(out.begin(), out.end(),
                          [](const Choice& c) { return c.math == CUDNN_TENSOR_OP_MATH; });
  return out;
}

// cuDNN's heuristic list for the call.
std::vector<Choice> heuristic_choices(cudnnHandle_t h, const Descs& d, const Call& c) {
  const ScalarType dt = c.x.dtype();
  int n = 0;
  switch (c.kind) {
    case Kind::Forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      EMBER_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
          h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
      return keep(perf, n, dt, false, c.deterministic);
    }
    case Kind::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      EMBER_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
          h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf));
      return keep(perf, n, dt, false, c.deterministic);
    }
    default: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      EMBER_CUDNN_CHECK(
          cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(),
                                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf));
      return keep(perf, n, dt, false, c.deterministic);
    }
  }
}

cudnnStatus_t workspace_size(cudnnHandle_t h, const Descs& d, Kind kind, int algo, size_t* bytes) {
  switch (kind) {
    case Kind::Forward:
      return cudnnGetConvolutionForwardWorkspaceSize(h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(),
                                                     static_cast<cudnnConvolutionFwdAlgo_t>(algo), bytes);
    case Kind::BackwardData:
      return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(),
                                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(algo),
                                                          bytes);
    default:
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(
          h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(),
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), bytes);
  }
}

// A workspace of `bytes` from the caching allocator into `ws`; false when it cannot be had.
bool allocate_workspace(size_t bytes, Device device, Tensor& ws) {
  if (bytes == 0) return true;
  try {
    ws = empty({static_cast<int64_t>(bytes)}, TensorOptions(kUInt8).device(device));
    return true;
  } catch (const Error&) {
    return false;  // out of memory: an algorithm needing less may still run
  }
}

// Runs the call with one algorithm, filling in its workspace size: its status (not thrown, so
// that the next one can be tried).
cudnnStatus_t launch(cudnnHandle_t h, const Descs& d, const Call& c, Choice& choice) {
  cudnnStatus_t st = cudnnSetConvolutionMathType(d.conv.get(), choice.math);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (choice.workspace == kUnknownWorkspace) {
    size_t bytes = 0;
    st = workspace_size(h, d, c.kind, choice.algo, &bytes);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    choice.workspace = bytes;
  }
  Tensor ws;
  if (!allocate_workspace(choice.workspace, c.x.device(), ws)) return CUDNN_STATUS_ALLOC_FAILED;
  const size_t bytes = choice.workspace;
  void* wsp = bytes > 0 ? ws.data_ptr() : nullptr;
  // Scaling factors are double for double data, else float.
  const double one_d = 1, beta_d = c.accumulate ? 1 : 0;
  const float one_f = 1, beta_f = c.accumulate ? 1.f : 0.f;
  const bool dbl = c.x.dtype() == kFloat64;
  const void* one = dbl ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = dbl ? static_cast<const void*>(&beta_d) : &beta_f;
  switch (c.kind) {
    case Kind::Forward:
      return cudnnConvolutionForward(h, one, d.x.get(), c.x.data_ptr(), d.w.get(), c.w.data_ptr(),
                                     d.conv.get(), static_cast<cudnnConvolutionFwdAlgo_t>(choice.algo), wsp,
                                     bytes, beta, d.y.get(), c.y.data_ptr());
    case Kind::BackwardData:
      return cudnnConvolutionBackwardData(h, one, d.w.get(), c.w.data_ptr(), d.y.get(), c.y.data_ptr(),
                                          d.conv.get(),
                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algo), wsp, bytes,
                                          beta, d.x.get(), c.x.data_ptr());
    default:
      return cudnnConvolutionBackwardFilter(h, one, d.x.get(), c.x.data_ptr(), d.y.get(), c.y.data_ptr(),
                                            d.conv.get(),
                                            static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algo), wsp,
                                            bytes, beta, d.w.get(), c.w.data_ptr());
  }
}

// cudnn.benchmark: the algorithms cudnnFind*AlgorithmEx runs, fastest first, with a workspace as
// large as the hungriest candidate wants and the allocator can give (PyTorch's rule). The output
// goes to a scratch buffer when it holds partial sums (a later batch chunk of a weight gradient).
// Empty when the measurement fails.
std::vector<Choice> measured_choices(cudnnHandle_t h, const Descs& d, const Call& c,
                                     const std::vector<Choice>& heuristic) {
  std::vector<size_t> sizes{0};
  for (const Choice& choice : heuristic) {
    size_t bytes = 0;
    if (cudnnSetConvolutionMathType(d.conv.get(), choice.math) == CUDNN_STATUS_SUCCESS &&
        workspace_size(h, d, c.kind, choice.algo, &bytes) == CUDNN_STATUS_SUCCESS)
      sizes.push_back(bytes);
  }
  cudaGetLastError();
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  Tensor ws;
  size_t bytes = 0;
  for (size_t want : sizes)
    if (allocate_workspace(want, c.x.device(), ws)) {
      bytes = want;
      break;
    }
  void* wsp = bytes > 0 ? ws.data_ptr() : nullptr;
  EMBER_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv.get(), default_math(c.x.dtype())));
  Tensor scratch;
  if (c.accumulate) scratch = empty({c.w.numel()}, c.w.options());
  void* out_w = c.accumulate ? scratch.data_ptr() : c.w.data_ptr();
  int n = 0;
  cudnnStatus_t st;
  std::vector<Choice> out;
  switch (c.kind) {
    case Kind::Forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      st = cudnnFindConvolutionForwardAlgorithmEx(h, d.x.get(), c.x.data_ptr(), d.w.get(), c.w.data_ptr(),
                                                  d.conv.get(), d.y.get(), c.y.data_ptr(),
                                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf, wsp, bytes);
      if (st == CUDNN_STATUS_SUCCESS) out = keep(perf, n, c.x.dtype(), true, c.deterministic);
      break;
    }
    case Kind::BackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      st = cudnnFindConvolutionBackwardDataAlgorithmEx(
          h, d.w.get(), c.w.data_ptr(), d.y.get(), c.y.data_ptr(), d.conv.get(), d.x.get(), c.x.data_ptr(),
          CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf, wsp, bytes);
      if (st == CUDNN_STATUS_SUCCESS) out = keep(perf, n, c.x.dtype(), true, c.deterministic);
      break;
    }
    default: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      st = cudnnFindConvolutionBackwardFilterAlgorithmEx(
          h, d.x.get(), c.x.data_ptr(), d.y.get(), c.y.data_ptr(), d.conv.get(), d.w.get(), out_w,
          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf, wsp, bytes);
      if (st == CUDNN_STATUS_SUCCESS) out = keep(perf, n, c.x.dtype(), true, c.deterministic);
      break;
    }
  }
  cudaGetLastError();  // a failed measurement leaves nothing that should fail the next call
  return out;
}

// Runs one call through the legacy API with the cached algorithm, else chooses one (measured with
// cudnn.benchmark, else the heuristic's; the heuristic's list backs a measurement up), caches the
// first that runs; false when none runs.
bool run_legacy(cudnnHandle_t h, const Call& c) {
  Descs d;
  describe(d, c);
  const bool measure = cudnn::benchmark();
  const ConvPlans::Key key = plan_key<3>(c, {default_math(c.x.dtype()), measure, c.deterministic});
  // The cached algorithm, unless it fails now (its workspace no longer fits): then choose again.
  if (std::optional<Choice> cached = choice_cache().find(key))
    if (launch(h, d, c, *cached) == CUDNN_STATUS_SUCCESS) return true;
  std::vector<Choice> choices = heuristic_choices(h, d, c);
  if (measure) {
    std::vector<Choice> measured = measured_choices(h, d, c, choices);
    choices.insert(choices.begin(), measured.begin(), measured.end());
  }
  for (Choice& choice : choices) {
    if (launch(h, d, c, choice) == CUDNN_STATUS_SUCCESS) {
      choice_cache().insert(key, choice);
      return true;
    }
    cudaGetLastError();  // a refused algorithm leaves nothing that should fail the next one
  }
  return false;
}

// The backend (graph) API. Tensors in a graph and its variant packs are named by unique ids.
constexpr int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y';

// The attributes of one kind's operation descriptor: x, w, y (as dx, dw, dy where they are
// gradients), the convolution, alpha and beta.
struct OpAttributes {
  cudnnBackendDescriptorType_t type;
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
};

const OpAttributes& op_attributes(Kind k) {
  static constexpr OpAttributes kOps[] = {
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
  };
  return kOps[static_cast<int>(k)];
}

// The alignment of t's data in bytes: the largest power of two dividing its address, up to 16.
int64_t alignment(const Tensor& t) {
  const auto address = reinterpret_cast<uintptr_t>(t.data_ptr());
  int64_t a = 1;
  while (a < 16 && address % (2 * a) == 0) a *= 2;
  return a;
}

// The descriptor of t [N, C, H, W], packed in the format (a dim of size 1 gets the stride it
// would have in the format, whatever t's is).
cudnn_backend::Descriptor tensor_descriptor(const Tensor& t, int64_t uid, bool nhwc) {
  const int64_t n = t.size(0), ch = t.size(1), h = t.size(2), w = t.size(3);
  const int64_t dims[] = {n, ch, h, w};
  const int64_t nchw_strides[] = {ch * h * w, h * w, w, 1}, nhwc_strides[] = {h * w * ch, 1, w * ch, ch};
  const cudnnDataType_t dt = data_type(t.dtype());
  const int64_t align = alignment(t);
  const bool is_virtual = false;
  cudnn_backend::Descriptor d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
  d.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  d.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, nhwc ? nhwc_strides : nchw_strides);
  d.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  d.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  d.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
  d.finalize();
  return d;
}

// The call's one-operation graph, finalized, after everything it references (the graph is last);
// empty when cuDNN declines the operation or the graph, with why into `why`. Math in float32
// for every dtype that gets here (float64 stays on the legacy API); groups follow from the
// channel counts of x and w.
std::vector<cudnn_backend::Descriptor> build_graph(cudnnHandle_t h, const Call& c, std::string& why) {
  std::vector<cudnn_backend::Descriptor> d;
  d.push_back(tensor_descriptor(c.x, kUidX, c.nhwc));
  d.push_back(tensor_descriptor(c.w, kUidW, c.nhwc));
  d.push_back(tensor_descriptor(c.y, kUidY, c.nhwc));
  const Conv2dParams& p = c.p;
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t spatial_dims = 2, padding[] = {p.padding[0], p.padding[1]},
                stride[] = {p.stride[0], p.stride[1]}, dilation[] = {p.dilation[0], p.dilation[1]};
  cudnn_backend::Descriptor conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
  conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial_dims);
  conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, padding);
  conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, padding);
  conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride);
  conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation);
  conv.finalize();
  const OpAttributes& a = op_attributes(c.kind);
  const float alpha = 1, beta = c.accumulate ? 1.f : 0.f;
  cudnn_backend::Descriptor op(a.type);
  op.set(a.x, d[0]);
  op.set(a.w, d[1]);
  op.set(a.y, d[2]);
  op.set(a.conv, conv);
  op.set(a.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
  op.set(a.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  if (cudnnStatus_t st = op.try_finalize(); st != CUDNN_STATUS_SUCCESS) {
    why = cudnn_backend::describe_failure("cudnnBackendFinalize(convolution operation)", st);
    return {};
  }
  cudnn_backend::Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, op);
  if (cudnnStatus_t st = graph.try_finalize(); st != CUDNN_STATUS_SUCCESS) {
    why = cudnn_backend::describe_failure("cudnnBackendFinalize(operation graph)", st);
    return {};
  }
  d.push_back(std::move(conv));
  d.push_back(std::move(op));
  d.push_back(std::move(graph));
  return d;
}

// A problem's backend answer: its graph and the plan chosen for it, or why there is none.
struct BackendPlan {
  std::vector<cudnn_backend::Descriptor> graph;
  std::optional<cudnn_backend::Plan> plan;
  std::string why;
};

// Backend plans by everything the choice depends on (run_backend's key). Per thread, as
// PyTorch's: cuDNN does not promise that one plan runs from two threads at once. Leaked, as the
// handles are.
using BackendPlans = detail::PlanCache<kProblemFields + 7, std::shared_ptr<const BackendPlan>>;

BackendPlans& backend_cache() {
  thread_local auto* cache = new BackendPlans;
  return *cache;
}

std::atomic<int64_t> g_backend_calls{0}, g_legacy_calls{0};
thread_local std::string t_last_fallback;

// Runs one call through the backend API with the problem's cached plan, else chooses one (which
// runs the call) and caches it, or that there is none: false then, with why in t_last_fallback.
bool run_backend(cudnnHandle_t h, const Call& c) {
  const ScalarType dt = c.x.dtype();
  if (dt == kFloat64) {
    t_last_fallback = "float64 runs on the legacy API";
    return false;
  }
  const bool tensor_cores = dt != kFloat32 || cudnn::allow_tf32();
  const bool measure = cudnn::benchmark();
  const BackendPlans::Key key = plan_key<7>(c, {tensor_cores, measure, c.accumulate, c.deterministic,
                                                alignment(c.x), alignment(c.w), alignment(c.y)});
  const cudnn_backend::VariantPack data{{kUidX, kUidW, kUidY},
                                        {c.x.data_ptr(), c.w.data_ptr(), c.y.data_ptr()}};
  // The cached plan, unless it fails now (its workspace no longer fits): then choose again.
  if (std::optional<std::shared_ptr<const BackendPlan>> cached = backend_cache().find(key)) {
    const BackendPlan& b = **cached;
    if (!b.plan) {
      t_last_fallback = b.why;
      return false;
    }
    if (cudnn_backend::run(h, *b.plan, data, c.x.device())) return true;
  }
  auto b = std::make_shared<BackendPlan>();
  b->graph = build_graph(h, c, b->why);
  if (!b->graph.empty()) {
    // Measuring must not add to a weight gradient's partial sums: its runs write to scratch.
    Tensor scratch;
    cudnn_backend::VariantPack timing = data;
    if (measure && c.accumulate) {
      scratch = empty({c.w.numel()}, c.w.options());
      timing.pointers[1] = scratch.data_ptr();
    }
    int64_t found = 0;
    std::vector<cudnn_backend::Candidate> candidates =
        cudnn_backend::engine_configs(b->graph.back(), tensor_cores, c.deterministic, found);
    b->plan = cudnn_backend::choose_and_run(h, candidates, data, timing, c.x.device(), measure);
    if (!b->plan)
      b->why = candidates.empty()
                   ? ember::detail::str_cat("no engine passed the numerical-note filter (", found,
                                            " engine configs from heuristics mode A and fallback)")
                   : ember::detail::str_cat("none of ", candidates.size(),
                                            " engine configs finalized, got its workspace and ran");
  }
  backend_cache().insert(key, b);
  if (!b->plan) t_last_fallback = b->why;
  return b->plan.has_value();
}

// Runs one call, through the backend API when it has a plan, else through the legacy API; false
// when neither has an algorithm.
bool run_call(const Call& c) {
  cudnnHandle_t h = cudnn_handle();
  if (run_backend(h, c)) {
    ++g_backend_calls;
    return true;
  }
  if (!run_legacy(h, c)) return false;
  ++g_legacy_calls;
  return true;
}

// The convolution in one memory format: stand-ins packed and fitted, the batch split so that
// each call's tensors stay under cuDNN's 2^31 elements; the output copied back when it had a
// stand-in. False when cuDNN has no algorithm.
bool run_in_format(Kind kind, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p,
                   bool nhwc, bool deterministic) {
  const auto [hx, hy] = fit(x.size(2), y.size(2), w.size(2), p.padding[0], p.stride[0], p.dilation[0]);
  const auto [wx, wy] = fit(x.size(3), y.size(3), w.size(3), p.padding[1], p.stride[1], p.dilation[1]);
  Tensor xs = stand_in(x, hx, wx, nhwc, kind != Kind::BackwardData);
  Tensor ys = stand_in(y, hy, wy, nhwc, kind != Kind::Forward);
  Tensor ws = stand_in(w, w.size(2), w.size(3), nhwc, kind != Kind::BackwardFilter);
  const int64_t per_image = std::max(xs.numel() / xs.size(0), ys.numel() / ys.size(0));
  EMBER_CHECK(per_image <= INT_MAX && ws.numel() <= INT_MAX, op_name(kind),
              ": tensors too large for cuDNN (input ", x.sizes(), ", weight ", w.sizes(), ", output ",
              y.sizes(), ")");
  const int64_t n = x.size(0), chunk = std::max<int64_t>(1, INT_MAX / per_image);
  for (int64_t n0 = 0; n0 < n; n0 += chunk) {
    const int64_t len = std::min(chunk, n - n0);
    Tensor xc = xs.narrow(0, n0, len), yc = ys.narrow(0, n0, len);
    if (!run_call({kind, xc, ws, yc, p, nhwc, kind == Kind::BackwardFilter && n0 > 0, deterministic}))
      return false;
  }
  const Tensor& out = kind == Kind::Forward ? y : kind == Kind::BackwardData ? x : w;
  const Tensor& s = kind == Kind::Forward ? ys : kind == Kind::BackwardData ? xs : ws;
  if (!s.is_same(out)) out.copy_(s.narrow(2, 0, out.size(2)).narrow(3, 0, out.size(3)));
  return true;
}

// x [N, C, Hx, Wx], w [K, C / groups, kh, kw], y [N, K, Hy, Wy] as the frontend sized them; the
// output is y (Forward), x (BackwardData) or w (BackwardFilter).
void convolution(Kind kind, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p) {
  const char* op = op_name(kind);
  detail::check_on_current_device(op, x.device());
  EMBER_CHECK(is_floating_point(x.dtype()) && w.dtype() == x.dtype() && y.dtype() == x.dtype(), op,
              ": expected tensors of one floating dtype, got ", x.dtype(), ", ", w.dtype(), " and ",
              y.dtype());
  const Tensor& out = kind == Kind::Forward ? y : kind == Kind::BackwardData ? x : w;
  if (x.numel() == 0 || w.numel() == 0 || y.numel() == 0) {
    out.zero_();  // a sum over nothing
    return;
  }
  // NHWC when some tensor is channels-last (PyTorch's rule); cuDNN has no float64 NHWC kernels.
  const bool nhwc = x.dtype() != kFloat64 && !(x.is_contiguous() && w.is_contiguous() && y.is_contiguous());
  auto run = [&](bool deterministic) {
    return (nhwc && run_in_format(kind, x, w, y, p, true, deterministic)) ||
           run_in_format(kind, x, w, y, p, false, deterministic);
  };
  const bool deterministic = cudnn::deterministic() || are_deterministic_algorithms_enabled();
  if (run(deterministic)) return;
  const std::string problem = ember::detail::str_cat(
      "input ", x.sizes(), ", weight ", w.sizes(), ", output ", y.sizes(), " (", x.dtype(), "), stride (",
      p.stride[0], ", ", p.stride[1], "), padding (", p.padding[0], ", ", p.padding[1], "), dilation (",
      p.dilation[0], ", ", p.dilation[1], "), groups ", p.groups);
  // With warn_only the nondeterministic algorithms may run, after a warning.
  if (are_deterministic_algorithms_enabled()) {
    ember::detail::alert_not_deterministic(op, "cuDNN's convolution of " + problem);
    if (run(false)) return;
  }
  throw Error(ember::detail::str_cat(op, ": cuDNN has no ", deterministic ? "deterministic " : "",
                                     "algorithm for ", problem));
}

void add_bias(const Tensor& out, const Tensor& bias) {
  if (bias.defined()) out.add_(bias.view({1, bias.size(0), 1, 1}));
}

void conv2d_cuda(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                 const Conv2dParams& p) {
  convolution(Kind::Forward, input, weight, out, p);
  add_bias(out, bias);
}

void conv_transpose2d_cuda(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const Conv2dParams& p) {
  convolution(Kind::BackwardData, out, weight, input, p);
  add_bias(out, bias);
}

void conv2d_weight_cuda(const Tensor& grad_weight, const Tensor& input, const Tensor& grad_output,
                        const Conv2dParams& p) {
  convolution(Kind::BackwardFilter, input, grad_weight, grad_output, p);
}

KernelRegistrar<Conv2dFn> reg_conv(conv2d_stub, kCUDA, &conv2d_cuda);
KernelRegistrar<Conv2dFn> reg_conv_t(conv_transpose2d_stub, kCUDA, &conv_transpose2d_cuda);
KernelRegistrar<Conv2dWeightFn> reg_conv_w(conv2d_weight_stub, kCUDA, &conv2d_weight_cuda);

}  // namespace

namespace cudnn::detail {
int64_t backend_calls() { return g_backend_calls.load(); }
int64_t legacy_calls() { return g_legacy_calls.load(); }
std::string last_fallback_reason() { return t_last_fallback; }
}  // namespace cudnn::detail

}  // namespace ember::cuda
