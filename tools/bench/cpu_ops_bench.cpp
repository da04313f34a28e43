// CPU op throughput: `build/tools/bench/cpu_ops_bench`. Memory-bound ops report GB/s (bytes
// read + written once), compute-bound ones GFLOP/s; BM_peak_fma measures the machine's f32
// FMA ceiling with the same thread count, so matmul can be read as a fraction of peak.
#include <benchmark/benchmark.h>

#include <ember/ember.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace {

using ember::Tensor;

// Reports `per_iteration` units of work as giga-units per second.
void set_rate(benchmark::State& state, const char* name, double per_iteration) {
  state.counters[name] = benchmark::Counter(per_iteration * static_cast<double>(state.iterations()) / 1e9,
                                            benchmark::Counter::kIsRate);
}

void BM_add(benchmark::State& state) {
  int64_t n = state.range(0);
  Tensor a = ember::rand({n}), b = ember::rand({n});
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
  set_rate(state, "GB", 12.0 * static_cast<double>(n));
}
BENCHMARK(BM_add)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same add into an existing tensor: the kernel's bandwidth without the page faults of a
// fresh 64 MB output.
void BM_add_inplace(benchmark::State& state) {
  int64_t n = state.range(0);
  Tensor a = ember::rand({n}), b = ember::rand({n});
  for (auto _ : state) a.add_(b);
  set_rate(state, "GB", 12.0 * static_cast<double>(n));
}
BENCHMARK(BM_add_inplace)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_sum(benchmark::State& state) {
  int64_t n = state.range(0);
  Tensor a = ember::rand({n});
  for (auto _ : state) benchmark::DoNotOptimize(a.sum());
  set_rate(state, "GB", 4.0 * static_cast<double>(n));
}
BENCHMARK(BM_sum)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_softmax(benchmark::State& state) {
  int64_t rows = state.range(0), cols = state.range(1);
  Tensor a = ember::randn({rows, cols});
  for (auto _ : state) benchmark::DoNotOptimize(a.softmax(-1));
  set_rate(state, "GB", 8.0 * static_cast<double>(rows * cols));
}
BENCHMARK(BM_softmax)->Args({4096, 1024})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_matmul(benchmark::State& state) {
  int64_t n = state.range(0);
  auto dtype = static_cast<ember::ScalarType>(state.range(1));
  Tensor a = ember::randn({n, n}, dtype), b = ember::randn({n, n}, dtype);
  for (auto _ : state) benchmark::DoNotOptimize(a.matmul(b));
  set_rate(state, "GFLOP", 2.0 * static_cast<double>(n * n * n));
  state.SetLabel(std::string(ember::to_string(dtype)));
}
BENCHMARK(BM_matmul)
    ->Args({1024, static_cast<int64_t>(ember::kFloat32)})
    ->Args({1024, static_cast<int64_t>(ember::kFloat64)})
    ->Args({1024, static_cast<int64_t>(ember::kBFloat16)})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_conv2d(benchmark::State& state) {
  // ResNet-like 3x3 layer: N=16, C=K=64, 56x56, padding 1.
  const int64_t n = 16, c = 64, k = 64, hw = 56;
  Tensor x = ember::randn({n, c, hw, hw}), w = ember::randn({k, c, 3, 3});
  for (auto _ : state) benchmark::DoNotOptimize(ember::conv2d(x, w, {}, {1, 1}, {1, 1}));
  set_rate(state, "GFLOP", 2.0 * static_cast<double>(n * k * c * 9 * hw * hw));
}
BENCHMARK(BM_conv2d)->Unit(benchmark::kMillisecond)->UseRealTime();

// A MobileNet-like depthwise 3x3 layer (N=16, C=128, 56x56, padding 1), forward and backward
// (input and weight gradients), NCHW (arg 0) or channels-last (arg 1).
void BM_conv2d_depthwise(benchmark::State& state) {
  const int64_t n = 16, c = 128, hw = 56;
  const bool cl = state.range(0) != 0;
  Tensor x = ember::randn({n, c, hw, hw}), w = ember::randn({c, 1, 3, 3}), dy = ember::randn({n, c, hw, hw});
  if (cl) {
    x = x.contiguous(ember::MemoryFormat::ChannelsLast);
    dy = dy.contiguous(ember::MemoryFormat::ChannelsLast);
  }
  x.requires_grad_();
  w.requires_grad_();
  for (auto _ : state)
    benchmark::DoNotOptimize(ember::autograd::grad({ember::conv2d(x, w, {}, 1, 1, 1, c)}, {x, w}, {dy}));
  set_rate(state, "GFLOP", 3 * 2.0 * static_cast<double>(n * c * 9 * hw * hw));
  state.SetLabel(cl ? "NHWC" : "NCHW");
}
BENCHMARK(BM_conv2d_depthwise)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// One image through the augmentation a DataLoader worker runs per sample: Fashion-MNIST (arg 0:
// [1, 28, 28], RandomCrop(28, 4) + Normalize) or CIFAR-10 (arg 1: [3, 32, 32], RandomCrop(32, 4) +
// RandomHorizontalFlip + Normalize). items_per_second is images per second on one thread.
void BM_transforms(benchmark::State& state) {
  namespace tf = ember::data::transforms;
  const bool cifar = state.range(0) == 1;
  Tensor image = cifar ? ember::randint(0, 256, {3, 32, 32}, ember::kUInt8)
                       : ember::randint(0, 256, {1, 28, 28}, ember::kUInt8);
  tf::Compose pipeline =
      cifar ? tf::Compose({tf::RandomCrop(32, 4), tf::RandomHorizontalFlip(),
                           tf::Normalize({0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616})})
            : tf::Compose({tf::RandomCrop(28, 4), tf::Normalize({0.2860}, {0.3530})});
  int64_t index = 0;
  for (auto _ : state) {
    tf::SampleRandom random(0, 0, index++);
    benchmark::DoNotOptimize(pipeline(image, random));
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(cifar ? "cifar10" : "fashion_mnist");
}
BENCHMARK(BM_transforms)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// The host cost of one small op call (allocation, checks, dispatch): what DESIGN.md asks to keep
// at a few microseconds.
void BM_op_call(benchmark::State& state) {
  Tensor a = ember::ones({4}), b = ember::ones({4});
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
}
BENCHMARK(BM_op_call)->Unit(benchmark::kMicrosecond);

// The same call when an input requires grad: the cost of recording a node (and of releasing the
// graph when the result dies).
void BM_op_call_recording(benchmark::State& state) {
  Tensor a = ember::ones({4}).requires_grad_(), b = ember::ones({4});
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
}
BENCHMARK(BM_op_call_recording)->Unit(benchmark::kMicrosecond);

// One call under NoGradGuard with an input that requires grad: the check must cost nothing.
void BM_op_call_no_grad(benchmark::State& state) {
  Tensor a = ember::ones({4}).requires_grad_(), b = ember::ones({4});
  ember::NoGradGuard no_grad;
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
}
BENCHMARK(BM_op_call_no_grad)->Unit(benchmark::kMicrosecond);

// The host cost of the backward engine: 64 small ops recorded and differentiated, 65 nodes an
// iteration. The time includes the forward's recording, about half of it (this machine, 2 cores:
// 105 us, 58 us without the backward: 0.7 us a node).
void BM_backward_chain(benchmark::State& state) {
  Tensor a = ember::ones({4}).requires_grad_(), b = ember::ones({4});
  for (auto _ : state) {
    Tensor x = a;
    for (int i = 0; i < 64; ++i) x = x + b;
    benchmark::DoNotOptimize(ember::autograd::grad({x.sum()}, {a}));
  }
}
BENCHMARK(BM_backward_chain)->Unit(benchmark::kMicrosecond);

#if defined(__AVX512F__)
// 16 independent FMA chains per thread on 512-bit registers: the f32 arithmetic ceiling.
void BM_peak_fma(benchmark::State& state) {
  constexpr int64_t kIters = 1 << 20;
  int threads = ember::get_num_threads();
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    {
      __m512 acc[16];
      for (auto& r : acc) r = _mm512_set1_ps(1.0f);
      const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
      for (int64_t i = 0; i < kIters; ++i)
        for (auto& r : acc) r = _mm512_fmadd_ps(r, m, c);
      float sink = 0;
      for (auto& r : acc) sink += _mm512_reduce_add_ps(r);
      benchmark::DoNotOptimize(sink);
    }
  }
  set_rate(state, "GFLOP", static_cast<double>(threads) * kIters * 16 * 16 * 2);
}
BENCHMARK(BM_peak_fma)->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

}  // namespace

BENCHMARK_MAIN();
