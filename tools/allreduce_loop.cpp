// All-reduces one tensor over and over for --seconds: the job that scripts/multi_gpu_check.sh
// kills (kill -9) and stops (SIGSTOP) ranks of, to see emberrun and the process group's
// timeout react. Each rank prints "allreduce_loop: rank R running" after its first all-reduce,
// and "allreduce_loop: rank R: <error>" (exit 1) when a collective fails.
//
//   emberrun --nproc-per-node 2 build/tools/allreduce_loop --timeout-s 10
//
// Options: --backend nccl|gloo (default nccl when CUDA is available), --seconds (300), --numel
// (float32 elements, 16Mi = 64 MiB), --timeout-s (the group's collective timeout, 600).
#include <ember/distributed/distributed.h>
#include <ember/ember.h>
#include <ember/tools/common/arg_parser.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

namespace d = ember::distributed;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  std::string backend = ember::cuda::is_available() ? "nccl" : "gloo";
  double seconds = 300;
  int64_t numel = int64_t{16} << 20;
  int timeout_s = 600;
  ember::tools::ArgParser args("allreduce_loop");
  args.option("--backend", &backend, "nccl or gloo")
      .option("--seconds", &seconds, "how long to all-reduce")
      .option("--numel", &numel, "float32 elements of the tensor")
      .option("--timeout-s", &timeout_s, "the group's collective timeout in seconds");
  if (std::optional<int> exit_code = args.parse_or_exit_code(argc, argv)) return *exit_code;
  int rank = -1;
  try {
    ember::Device device(ember::kCPU);
    if (backend == "nccl") {
      device = ember::Device(ember::kCUDA, d::get_node_local_rank());
      ember::cuda::set_device(device.index);
    }
    d::InitOptions init;
    init.timeout = std::chrono::seconds(timeout_s);
    d::init_process_group(backend, init);
    rank = d::get_rank();
    ember::Tensor t = ember::ones({numel}, ember::TensorOptions(ember::kFloat32).device(device));
    auto start = Clock::now();
    int64_t n = 0;
    while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
      // A wait with a timeout blocks the host (for NCCL too) until the all-reduce ends or fails.
      d::all_reduce(t, d::ReduceOp::AVG, nullptr, true)->wait(std::chrono::seconds(3 * timeout_s));
      if (n++ == 0) {
        std::printf("allreduce_loop: rank %d running\n", rank);
        std::fflush(stdout);
      }
    }
    std::printf("allreduce_loop: rank %d done, %lld all-reduces\n", rank, static_cast<long long>(n));
    d::destroy_process_group();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_loop: rank %d: %s\n", rank, e.what());
    return 1;
  }
}
