// ember's side of the GPU op benchmarks (issue 4): the same cases, sizes and timing method as
// tools/bench/torch_ops_bench.py, which runs PyTorch in the same device call; compare.py prints
// both side by side. Each case prints one JSON line: the steady-state ms per call (calls back to
// back between CUDA events, as in a training loop where the host queues ahead), the achieved
// TFLOP/s or TB/s at that time, and call_ms, the median of single calls between their own events.
//   cuda_ops_bench [filter-substring]
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <ember/cuda/attention_flash.h>
#include <ember/cuda/conv_cudnn.h>
#include <ember/ember.h>

using namespace ember;

namespace {

std::string filter;

void check(cudaError_t e) {
  if (e != cudaSuccess) throw Error(std::string("cuda_ops_bench: ") + cudaGetErrorString(e));
}

struct Timing {
  double ms;  // steady state: calls back to back between two events, median of `runs`
  double
      call_ms;  // median of single calls between their own events (adds the host's time to the first launch)
};

// Milliseconds per call of `step`, after `warm` untimed calls. The warm-up calls are the profiled
// range (ncu --profile-from-start off: the case's kernels, not its inputs' set-up).
Timing time_ms(const std::function<void()>& step, int warm = 5, int iters = 20, int runs = 5) {
  check(cudaProfilerStart());
  for (int i = 0; i < warm; ++i) step();
  check(cudaProfilerStop());
  check(cudaDeviceSynchronize());
  cudaEvent_t s, e;
  check(cudaEventCreate(&s));
  check(cudaEventCreate(&e));
  auto between_events = [&](int calls) {
    check(cudaEventRecord(s, nullptr));
    for (int i = 0; i < calls; ++i) step();
    check(cudaEventRecord(e, nullptr));
    check(cudaEventSynchronize(e));
    float ms = 0;
    check(cudaEventElapsedTime(&ms, s, e));
    return static_cast<double>(ms) / calls;
  };
  auto median = [&](int n, int calls) {
    std::vector<double> t;
    for (int i = 0; i < n; ++i) t.push_back(between_events(calls));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  Timing r{median(runs, iters), median(iters, 1)};
  check(cudaEventDestroy(s));
  check(cudaEventDestroy(e));
  return r;
}

// `work` is FLOPs (unit TFLOP/s) or bytes moved (unit TB/s).
void run(const std::string& name, double work, const char* unit, const std::function<void()>& step) {
  if (!filter.empty() && name.find(filter) == std::string::npos) return;
  try {
    const Timing t = time_ms(step);
    std::printf("{\"case\": \"%s\", \"ms\": %.4f, \"%s\": %.3f, \"call_ms\": %.4f}\n", name.c_str(), t.ms,
                unit, work / t.ms / 1e9, t.call_ms);
  } catch (const Error& err) {
    std::printf("{\"case\": \"%s\", \"error\": \"%s\"}\n", name.c_str(), err.what());
  }
  std::fflush(stdout);
}

const char* dtype_name(ScalarType t) { return t == kBFloat16 ? "bf16" : t == kFloat16 ? "f16" : "f32"; }

void matmul_cases() {
  for (ScalarType dt : {kBFloat16, kFloat32})
    for (int64_t n : {4096, 8192}) {
      Tensor a = randn({n, n}, TensorOptions(dt).device(kCUDA)),
             b = randn({n, n}, TensorOptions(dt).device(kCUDA));
      run(std::string("matmul ") + dtype_name(dt) + " " + std::to_string(n) + "^3", 2.0 * n * n * n, "tflops",
          [&] { matmul(a, b); });
    }
}

// BERT-base's linears at b32 s128 in bf16 (4096 tokens): forward with its bias, and forward plus
// backward (input, weight and bias gradients); the 30522-word head and its 8-aligned twin show
// what an unaligned leading dimension costs.
void linear_cases() {
  const int64_t tokens = 4096;
  const std::pair<int64_t, int64_t> shapes[] = {{768, 768},  {768, 2304},  {768, 3072},
                                                {3072, 768}, {768, 30522}, {768, 30528}};
  const TensorOptions o = TensorOptions(kBFloat16).device(kCUDA);
  for (auto [in, out] : shapes) {
    Tensor x = randn({tokens, in}, o), w = randn({out, in}, o) * 0.02, b = randn({out}, o),
           g = randn({tokens, out}, o);
    const std::string shape =
        "[" + std::to_string(tokens) + "," + std::to_string(in) + "]->" + std::to_string(out);
    const double flops = 2.0 * static_cast<double>(tokens * in * out);
    run("linear fwd " + shape + " bf16", flops, "tflops", [&] { nn::functional::linear(x, w, b); });
    Tensor xr = x.detach().requires_grad_(), wr = w.detach().requires_grad_(),
           br = b.detach().requires_grad_();
    run("linear fwd+bwd " + shape + " bf16", 3 * flops, "tflops", [&] {
      xr.set_grad(Tensor()), wr.set_grad(Tensor()), br.set_grad(Tensor());
      nn::functional::linear(xr, wr, br).backward(g);
    });
  }
}

void elementwise_cases() {
  const int64_t n = 256LL << 20;
  for (ScalarType dt : {kFloat32, kBFloat16}) {
    Tensor a = randn({n}, TensorOptions(dt).device(kCUDA)), b = randn({n}, TensorOptions(dt).device(kCUDA));
    double bytes = static_cast<double>(n) * element_size(dt);
    run(std::string("add 256M ") + dtype_name(dt), 3 * bytes, "tbps", [&] { add(a, b); });
    run(std::string("gelu 256M ") + dtype_name(dt), 2 * bytes, "tbps", [&] { gelu(a); });
    // Forward reads x and writes y; backward reads dy and x and writes dx: 5 passes.
    Tensor x = a.detach().requires_grad_();
    run(std::string("gelu fwd+bwd 256M ") + dtype_name(dt), 5 * bytes, "tbps",
        [&] { autograd::grad({gelu(x)}, {x}, {b}); });
  }
}

// BERT-base's attention at b32 s128 in bf16: q, k, v [32, 12, 128, 64] chunked from a packed
// [32, 128, 2304] projection, as nn::MultiheadAttention's, forward and forward plus backward, without and
// with dropout; "cudnn" runs cuDNN's kernels instead of ember's for short sequences. TFLOP/s counts the
// products only (2 in the forward, 5 in the backward).
void attention_cases() {
  const int64_t B = 32, L = 128, H = 12, E = 64;
  const TensorOptions o = TensorOptions(kBFloat16).device(kCUDA);
  Tensor qkv = randn({B, L, 3 * H * E}, o).requires_grad_(), go = randn({B, H, L, E}, o);
  auto sdpa = [&](double p) {
    std::vector<Tensor> h = qkv.chunk(3, -1);
    for (Tensor& t : h) t = t.view({B, L, H, E}).transpose(1, 2);
    return scaled_dot_product_attention(h[0], h[1], h[2], {}, p);
  };
  const double flops = 4.0 * B * H * L * L * E;
  for (bool cudnn : {false, true})
    for (double p : {0.0, 0.1}) {
      const std::string name =
          "attention b32 h12 s128 d64 bf16 p" + std::string(p > 0 ? "0.1" : "0") + (cudnn ? " cudnn" : "");
      cuda::enable_flash_sdp(!cudnn);
      run("sdpa fwd " + name, flops, "tflops", [&] {
        NoGradGuard no_grad;
        sdpa(p);
      });
      run("sdpa fwd+bwd " + name, 3.5 * flops, "tflops", [&] {
        qkv.set_grad(Tensor());
        sdpa(p).backward(go);
      });
    }
  cuda::enable_flash_sdp(true);
}

// dropout (p = 0.1, as BERT's) forward + backward: the forward reads x and writes out and the
// bool mask, the backward reads the gradient and the mask and writes dx.
void dropout_cases() {
  const int64_t n = 256LL << 20;
  for (ScalarType dt : {kBFloat16, kFloat32}) {
    TensorOptions o = TensorOptions(dt).device(kCUDA);
    Tensor x = randn({n}, o), dy = randn({n}, o);
    x.requires_grad_();
    double bytes = static_cast<double>(n) * (4 * element_size(dt) + 2);
    run(std::string("dropout fwd+bwd 256M ") + dtype_name(dt), bytes, "tbps",
        [&] { autograd::grad({dropout(x, 0.1)}, {x}, {dy}); });
  }
}

// Forward + backward of a row-wise op on [32768, 1024]: reads x, writes y, reads dy (and y or
// x), writes dx: 5 passes over the tensor. Gradients come from autograd::grad, so nothing
// accumulates into .grad between iterations.
void rowwise_cases() {
  for (ScalarType dt : {kFloat32, kBFloat16}) {
    TensorOptions o = TensorOptions(dt).device(kCUDA);
    Tensor x = randn({32768, 1024}, o), dy = randn({32768, 1024}, o);
    Tensor w = randn({1024}, o), bias = randn({1024}, o);
    x.requires_grad_();
    w.requires_grad_();
    bias.requires_grad_();
    double bytes = 5.0 * x.numel() * element_size(dt);
    run(std::string("softmax fwd+bwd [32768,1024] ") + dtype_name(dt), bytes, "tbps",
        [&] { autograd::grad({softmax(x, -1)}, {x}, {dy}); });
    run(std::string("layer_norm fwd+bwd [32768,1024] ") + dtype_name(dt), bytes, "tbps", [&] {
      autograd::grad({layer_norm(x, {1024}, w, bias)}, {x, w, bias}, {dy});
    });
  }
  // The bias gradient of BERT's FFN input linear at b32 s128: a column sum of [4096, 3072]
  // (one read of the matrix).
  for (ScalarType dt : {kFloat32, kBFloat16}) {
    Tensor g = randn({4096, 3072}, TensorOptions(dt).device(kCUDA));
    run(std::string("sum dim 0 [4096,3072] ") + dtype_name(dt),
        static_cast<double>(g.numel()) * element_size(dt), "tbps", [&] { g.sum({0}); });
  }
  // cross_entropy over a 32768-word vocabulary: at least 3 passes (the forward reads the logits,
  // the backward reads them or their log_softmax and writes the gradient).
  for (ScalarType dt : {kFloat32, kBFloat16}) {
    Tensor x = randn({4096, 32768}, TensorOptions(dt).device(kCUDA)).requires_grad_();
    Tensor target = randint(0, 32768, {4096}, TensorOptions(kInt64).device(kCUDA));
    run(std::string("cross_entropy fwd+bwd [4096,32768] ") + dtype_name(dt),
        3.0 * x.numel() * element_size(dt), "tbps", [&] { autograd::grad({cross_entropy(x, target)}, {x}); });
  }
}

// batch_norm forward + backward in training mode on a ResNet-50 activation (bf16, float32
// weight, bias and running stats, as under mixed precision), NCHW and channels-last: 5 passes
// over x (the statistics and the output read x and write y; the backward reads dy and x and writes
// dx, its reduction reading them once more is not counted).
void batch_norm_cases() {
  TensorOptions o = TensorOptions(kBFloat16).device(kCUDA), f = TensorOptions(kFloat32).device(kCUDA);
  for (bool cl : {false, true}) {
    Tensor x = cl ? randn({128, 56, 56, 256}, o).permute({0, 3, 1, 2}) : randn({128, 256, 56, 56}, o);
    Tensor dy = cl ? randn({128, 56, 56, 256}, o).permute({0, 3, 1, 2}) : randn({128, 256, 56, 56}, o);
    Tensor w = randn({256}, f).requires_grad_(), bias = randn({256}, f).requires_grad_();
    Tensor rm = zeros({256}, f), rv = ones({256}, f);
    x.requires_grad_();
    run(std::string("batch_norm fwd+bwd [128,256,56,56] bf16 ") + (cl ? "NHWC" : "NCHW"),
        5.0 * x.numel() * element_size(kBFloat16), "tbps", [&] {
          autograd::grad({batch_norm(x, rm, rv, w, bias, true)}, {x, w, bias}, {dy});
        });
  }
}

// ResNet-50 convolutions (batch 128, bf16, every tensor channels-last), forward + backward (data
// and weight), with cudnn.benchmark off (heuristics) and on (measured engines), as
// torch_ops_bench.py sets torch.backends.cudnn.benchmark.
void conv_cases() {
  struct Shape {
    int64_t c, h, k, r, stride;
  };
  for (bool bench : {false, true})
    for (Shape s : {Shape{64, 56, 64, 3, 1}, Shape{64, 56, 256, 1, 1}, Shape{128, 28, 128, 3, 1},
                    Shape{256, 14, 256, 3, 1}, Shape{512, 7, 512, 3, 1}, Shape{256, 56, 512, 1, 2}}) {
      cuda::cudnn::set_benchmark(bench);
      TensorOptions o = TensorOptions(kBFloat16).device(kCUDA);
      const int64_t n = 128, pad = s.r / 2, ho = (s.h + 2 * pad - s.r) / s.stride + 1;
      Tensor x = randn({n, s.h, s.h, s.c}, o).permute({0, 3, 1, 2});  // NCHW sizes, NHWC memory
      Tensor w = randn({s.k, s.r, s.r, s.c}, o).permute({0, 3, 1, 2});
      Tensor dy = randn({n, ho, ho, s.k}, o).permute({0, 3, 1, 2});
      x.requires_grad_();
      w.requires_grad_();
      double flops = 3 * 2.0 * n * s.k * ho * ho * s.c * s.r * s.r;
      char name[128];
      std::snprintf(name, sizeof name,
                    "conv2d fwd+bwd bf16 NHWC n128 c%lld %lldx%lld k%lld %lldx%lld s%lld benchmark=%d",
                    (long long)s.c, (long long)s.h, (long long)s.h, (long long)s.k, (long long)s.r,
                    (long long)s.r, (long long)s.stride, bench ? 1 : 0);
      const int64_t legacy = cuda::cudnn::detail::legacy_calls();
      run(name, flops, "tflops", [&] { autograd::grad({conv2d(x, w, {}, s.stride, pad)}, {x, w}, {dy}); });
      // On stderr, so that the JSON lines stay as compare.py reads them.
      if (const int64_t n = cuda::cudnn::detail::legacy_calls() - legacy; n > 0)
        std::fprintf(stderr, "%s: %lld calls took cuDNN's legacy API (%s)\n", name, (long long)n,
                     cuda::cudnn::detail::last_fallback_reason().c_str());
    }
  cuda::cudnn::set_benchmark(false);
}

// BERT-base's parameter shapes (embeddings, 12 encoder layers, pooler, 2-way classifier).
std::vector<std::vector<int64_t>> bert_base_shapes() {
  std::vector<std::vector<int64_t>> s = {{30522, 768}, {512, 768}, {2, 768}, {768}, {768}};
  for (int l = 0; l < 12; ++l) {
    for (int i = 0; i < 4; ++i) s.insert(s.end(), {{768, 768}, {768}});  // q, k, v, attention output
    s.insert(s.end(), {{768}, {768}, {3072, 768}, {3072}, {768, 3072}, {768}, {768}, {768}});
  }
  s.insert(s.end(), {{768, 768}, {768}, {2, 768}, {2}});
  return s;
}

// One fused AdamW step over BERT-base's f32 parameters (109.5M in 201 tensors): reads param,
// grad, exp_avg, exp_avg_sq and writes three of them: 28 bytes per parameter.
void adamw_cases() {
  std::vector<Tensor> params;
  double numel = 0;
  for (const auto& shape : bert_base_shapes()) {
    Tensor p = randn(shape, TensorOptions(kFloat32).device(kCUDA));
    p.requires_grad_();
    p.set_grad(randn(shape, TensorOptions(kFloat32).device(kCUDA)));
    params.push_back(p);
    numel += static_cast<double>(p.numel());
  }
  optim::AdamW opt(params, optim::AdamWOptions(1e-4).fused(true));
  run("adamw fused step bert-base f32", 28 * numel, "tbps", [&] { opt.step(); });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) filter = argv[1];
  if (!cuda::is_available()) {
    std::printf("cuda_ops_bench: no CUDA device\n");
    return 1;
  }
  cuda::cudnn::set_allow_tf32(false);  // as torch_ops_bench.py: float32 is float32
  matmul_cases();
  linear_cases();
  elementwise_cases();
  dropout_cases();
  attention_cases();
  rowwise_cases();
  batch_norm_cases();
  conv_cases();
  adamw_cases();
  return 0;
}
