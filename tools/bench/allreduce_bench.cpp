// All-reduce bandwidth, as nccl-tests' all_reduce_perf reports it, one JSON line per case (rank
// 0 prints); tools/bench/torch_allreduce_bench.py measures torch.distributed the same way and
// compare.py prints both side by side:
//
//   emberrun --nproc-per-node 8 build/tools/bench/allreduce_bench > ember.jsonl
//   torchrun --nproc-per-node 8 tools/bench/torch_allreduce_bench.py > torch.jsonl
//   python3 tools/bench/compare.py ember.jsonl torch.jsonl
//
// Options: --backend nccl|gloo (default nccl with CUDA, else gloo on CPU tensors), --min-bytes
// and --max-bytes (default 1 MiB and 1 GiB), --factor (4), --iters (20), --warmup (5),
// --dtypes f32,bf16. A case is `iters` in-place SUM all-reduces back to back after `warmup`;
// its time is the slowest rank's mean per all-reduce. algbw = bytes / time and busbw = algbw *
// 2 (n - 1) / n, the bandwidth each link carries in a ring, comparable across world sizes.
#include <ember/distributed/distributed.h>
#include <ember/ember.h>
#include <ember/tools/common/arg_parser.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace ember;
namespace d = ember::distributed;

struct Options {
  std::string backend = ember::cuda::is_available() ? "nccl" : "gloo";
  int64_t min_bytes = 1 << 20, max_bytes = int64_t{1} << 30, factor = 4;
  int iters = 20, warmup = 5;
  std::vector<std::string> dtypes = {"f32", "bf16"};
};

std::string size_name(int64_t bytes) {
  if (bytes >= (1 << 30) && bytes % (1 << 30) == 0) return std::to_string(bytes >> 30) + "GiB";
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

// Seconds per all-reduce on this rank: the device (or Gloo) finished all of them.
double time_all_reduce(const Tensor& t, const Options& o, bool cuda) {
  auto sync = [&] {
    if (cuda) ember::cuda::synchronize();
  };
  for (int i = 0; i < o.warmup; ++i) d::all_reduce(t);
  sync();
  d::barrier();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters; ++i) d::all_reduce(t);
  sync();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / o.iters;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  tools::ArgParser args("allreduce_bench");
  args.option("--backend", &o.backend, "nccl or gloo")
      .option("--min-bytes", &o.min_bytes, "smallest tensor in bytes")
      .option("--max-bytes", &o.max_bytes, "largest tensor in bytes")
      .option("--factor", &o.factor, "size step between tensors")
      .option("--iters", &o.iters, "timed all-reduces per size")
      .option("--warmup", &o.warmup, "untimed all-reduces per size")
      .option("--dtypes", &o.dtypes, "f32 and/or bf16");
  if (std::optional<int> exit_code = args.parse_or_exit_code(argc, argv)) return *exit_code;
  if (o.backend != "nccl" && o.backend != "gloo") return args.fail("unknown backend " + o.backend);
  if (o.min_bytes < 4 || o.max_bytes < o.min_bytes || o.factor < 2 || o.iters < 1 || o.warmup < 0)
    return args.fail("needs 4 <= min-bytes <= max-bytes, factor >= 2, iters >= 1 and warmup >= 0");
  for (const std::string& dt : o.dtypes)
    if (dt != "f32" && dt != "bf16") return args.fail("unknown dtype " + dt + " (f32 or bf16)");
  try {
    bool cuda = o.backend == "nccl";
    Device device = kCPU;
    if (cuda) {
      ember::cuda::set_device(d::get_node_local_rank());
      device = Device(kCUDA, d::get_node_local_rank());
    }
    d::init_process_group(o.backend);
    int rank = d::get_rank(), n = d::get_world_size();
    for (const std::string& dt_name : o.dtypes) {
      ScalarType dt = dt_name == "f32" ? kFloat32 : kBFloat16;
      int64_t es = static_cast<int64_t>(element_size(dt));
      for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
        // Ones: the sums stay exact (at most n) and no NaN or overflow slows anything.
        Tensor t = ones({bytes / es}, TensorOptions(dt).device(device));
        Tensor sec = full({1}, time_all_reduce(t, o, cuda), TensorOptions(kFloat64).device(device));
        d::all_reduce(sec, d::ReduceOp::MAX);
        double s = sec.cpu().item<double>();
        double algbw = static_cast<double>(t.nbytes()) / s / 1e9;
        double busbw = algbw * 2.0 * (n - 1) / n;
        if (rank == 0)
          std::printf(
              "{\"case\": \"all_reduce %s %s x%d\", \"ms\": %.4f, \"algbw_gbps\": %.3f, \"busbw_gbps\": "
              "%.3f}\n",
              dt_name.c_str(), size_name(bytes).c_str(), n, s * 1e3, algbw, busbw);
        std::fflush(stdout);
      }
    }
    d::destroy_process_group();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
