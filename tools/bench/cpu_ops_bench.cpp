// CPU op throughput: `build/tools/bench/cpu_ops_bench`. Reports GB/s for memory-bound ops
// (bytes read + written) and GFLOP/s for compute-bound ones.
#include <benchmark/benchmark.h>

#include <ember/ember.h>

namespace {

void BM_add(benchmark::State& state) {
  int64_t n = state.range(0);
  ember::Tensor a = ember::rand({n}), b = ember::rand({n});
  for (auto _ : state) benchmark::DoNotOptimize(a + b);
  state.counters["GB/s"] =
      benchmark::Counter(3.0 * 4 * static_cast<double>(n) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_add)->Arg(1 << 24)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
