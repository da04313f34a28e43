// Checks every collective of a process group at the job's world size: each result against the
// same reduction computed here from every rank's input (each rank can rebuild all of them).
// Prints PASS or FAIL per collective (rank 0; each rank prints its own mismatches) and exits 1
// when any rank saw a failure.
//
//   emberrun --nproc-per-node 8 build/tools/collectives_check                  # NCCL on 8 GPUs
//   emberrun --nproc-per-node 4 build/tools/collectives_check --backend gloo   # CPU
//
// Options: --backend nccl|gloo (default nccl when CUDA is available, else gloo), --numel N (one
// more tensor size to check; default sizes 5 and 65537 elements), --inject-fault NAME (checks the
// checker: the last rank adds 1 to the results of the collectives whose check starts with NAME).
//
// Inputs are small integers: SUM, MIN, MAX, PRODUCT, broadcasts, gathers and all-to-alls are
// exact in every dtype (bf16 and uint8 too) up to 32 ranks and are compared exactly. AVG divides
// by the world size, which rounds: it is compared within rtol 1e-12 (f64), 1e-5 (f32), 2e-3
// (f16) and 1e-2 (bf16).
#include <ember/distributed/distributed.h>
#include <ember/ember.h>
#include <ember/tools/common/arg_parser.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace ember;
namespace d = ember::distributed;
using d::ReduceOp;

const std::vector<ScalarType> kDtypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8};
const std::vector<ReduceOp> kOps = {ReduceOp::SUM, ReduceOp::AVG, ReduceOp::PRODUCT, ReduceOp::MIN,
                                    ReduceOp::MAX};

struct Checker {
  std::shared_ptr<d::ProcessGroup> pg;
  Device device;
  int rank = 0, size = 1;
  std::vector<int64_t> numels = {5, 65537};
  int64_t failures = 0;  // this rank's, in the current collective
  std::string fault;     // --inject-fault

  // Rank r's input: element i is a small integer of k = i + 3r + 5 seed (PRODUCT: 2 for one
  // rank in four, else 1, so products stay below 256 up to 32 ranks).
  Tensor input(int r, ScalarType dt, IntArrayRef shape, ReduceOp op = ReduceOp::SUM, int seed = 0) const {
    Tensor t = empty(shape, kFloat64);
    double* p = t.data_ptr<double>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      int64_t k = i + 3 * r + 5 * seed;
      p[i] = op == ReduceOp::PRODUCT ? (k % 4 == 0 ? 2 : 1) : k % 7 + 1;
    }
    return t.to(device, dt);
  }
  // The reduction over every rank's input(r), in float64 on the CPU.
  Tensor reference(const std::function<Tensor(int)>& in, ReduceOp op) const {
    Tensor acc = in(0).cpu().to(kFloat64);
    for (int r = 1; r < size; ++r) {
      Tensor x = in(r).cpu().to(kFloat64);
      acc = op == ReduceOp::PRODUCT ? acc * x
            : op == ReduceOp::MIN   ? minimum(acc, x)
            : op == ReduceOp::MAX   ? maximum(acc, x)
                                    : acc + x;
    }
    return op == ReduceOp::AVG ? acc / size : acc;
  }
  // Exact, except AVG within its rounding (see the header).
  void expect(const Tensor& actual, const Tensor& expected, const std::string& what,
              ReduceOp op = ReduceOp::SUM) {
    ScalarType dt = actual.dtype();
    double rtol = op != ReduceOp::AVG ? 0
                  : dt == kFloat64    ? 1e-12
                  : dt == kFloat32    ? 1e-5
                  : dt == kFloat16    ? 2e-3
                                      : 1e-2;
    Tensor a = actual.cpu().to(kFloat64).contiguous(), e = expected.cpu().to(kFloat64).contiguous();
    if (!fault.empty() && rank == size - 1 && what.rfind(fault, 0) == 0) a = a + 1;
    std::string problem;
    if (!a.sizes().equals(e.sizes())) {
      problem = "shape mismatch";
    } else {
      const double *pa = a.data_ptr<double>(), *pe = e.data_ptr<double>();
      for (int64_t i = 0; i < a.numel() && problem.empty(); ++i)
        if (!(std::abs(pa[i] - pe[i]) <= rtol * std::abs(pe[i])))
          problem = ember::detail::str_cat("element ", i, " is ", pa[i], ", expected ", pe[i]);
    }
    if (problem.empty()) return;
    ++failures;
    std::fprintf(stderr, "[rank %d] FAIL %s %s %s: %s\n", rank, what.c_str(),
                 ember::detail::str_cat(dt).c_str(), std::string(d::to_string(op)).c_str(), problem.c_str());
  }
};

bool floating(ScalarType dt) { return dt == kFloat32 || dt == kFloat64 || dt == kFloat16 || dt == kBFloat16; }

void check_all_reduce(Checker& c) {
  for (int64_t n : c.numels)
    for (ScalarType dt : kDtypes)
      for (ReduceOp op : kOps) {
        if (op == ReduceOp::AVG && !floating(dt)) continue;
        Tensor t = c.input(c.rank, dt, {n}, op);
        c.pg->all_reduce(t, op)->wait();
        c.expect(t, c.reference([&](int r) { return c.input(r, dt, {n}, op); }, op), "all_reduce", op);
      }
}

void check_broadcast(Checker& c) {
  for (int64_t n : c.numels)
    for (ScalarType dt : kDtypes)
      for (int root = 0; root < c.size; ++root) {
        Tensor t = c.input(c.rank, dt, {n});
        c.pg->broadcast(t, root)->wait();
        c.expect(t, c.input(root, dt, {n}), "broadcast from " + std::to_string(root));
      }
}

void check_reduce(Checker& c) {
  int root = c.size - 1;
  for (int64_t n : c.numels)
    for (ScalarType dt : kDtypes)
      for (ReduceOp op : kOps) {
        if (op == ReduceOp::AVG && !floating(dt)) continue;
        Tensor t = c.input(c.rank, dt, {n}, op);
        c.pg->reduce(t, root, op)->wait();
        if (c.rank == root)  // only the root's result is defined
          c.expect(t, c.reference([&](int r) { return c.input(r, dt, {n}, op); }, op), "reduce", op);
      }
}

void check_all_gather(Checker& c) {
  for (int64_t n : c.numels)
    for (ScalarType dt : kDtypes) {
      std::vector<Tensor> outs, expected;
      for (int r = 0; r < c.size; ++r) {
        outs.push_back(empty({n}, TensorOptions(dt).device(c.device)));
        expected.push_back(c.input(r, dt, {n}));
      }
      c.pg->all_gather(outs, c.input(c.rank, dt, {n}))->wait();
      for (int r = 0; r < c.size; ++r) c.expect(outs[r], expected[r], "all_gather from " + std::to_string(r));
      Tensor flat = empty({c.size * n}, TensorOptions(dt).device(c.device));
      c.pg->all_gather_into_tensor(flat, c.input(c.rank, dt, {n}))->wait();
      c.expect(flat, cat(expected), "all_gather_into_tensor");
    }
}

void check_reduce_scatter(Checker& c) {
  for (int64_t n : c.numels)
    for (ScalarType dt : kDtypes)
      for (ReduceOp op : kOps) {
        if (op == ReduceOp::AVG && !floating(dt)) continue;
        // Tensor form: each rank's input has size * n elements; this rank gets slice `rank`.
        Tensor out = empty({n}, TensorOptions(dt).device(c.device));
        c.pg->reduce_scatter_tensor(out, c.input(c.rank, dt, {c.size * n}, op), op)->wait();
        auto slice = [&](int r) { return c.input(r, dt, {c.size * n}, op).narrow(0, c.rank * n, n); };
        c.expect(out, c.reference(slice, op), "reduce_scatter_tensor", op);
        // List form: inputs[j] of rank r is input(r, seed j).
        std::vector<Tensor> ins;
        for (int j = 0; j < c.size; ++j) ins.push_back(c.input(c.rank, dt, {n}, op, j));
        Tensor out2 = empty({n}, TensorOptions(dt).device(c.device));
        c.pg->reduce_scatter(out2, ins, op)->wait();
        c.expect(out2, c.reference([&](int r) { return c.input(r, dt, {n}, op, c.rank); }, op),
                 "reduce_scatter", op);
      }
}

void check_all_to_all(Checker& c) {
  int rank = c.rank, size = c.size;
  for (int64_t n : c.numels)
    for (ScalarType dt : kDtypes) {
      // Equal splits: rank r sends elements [j n, (j + 1) n) of its input to rank j.
      Tensor out = empty({size * n}, TensorOptions(dt).device(c.device));
      c.pg->all_to_all_single(out, c.input(rank, dt, {size * n}))->wait();
      std::vector<Tensor> expected;
      for (int j = 0; j < size; ++j) expected.push_back(c.input(j, dt, {size * n}).narrow(0, rank * n, n));
      c.expect(out, cat(expected), "all_to_all_single");
      // Uneven splits: every rank sends (j + 1) rows of 2 to rank j, so receives rank + 1 from each.
      int64_t rows = size * (size + 1) / 2;
      std::vector<int64_t> in_splits, out_splits(size, rank + 1);
      for (int j = 0; j < size; ++j) in_splits.push_back(j + 1);
      Tensor out2 = empty({size * (rank + 1), 2}, TensorOptions(dt).device(c.device));
      c.pg->all_to_all_single(out2, c.input(rank, dt, {rows, 2}), out_splits, in_splits)->wait();
      expected.clear();
      for (int j = 0; j < size; ++j)
        expected.push_back(c.input(j, dt, {rows, 2}).narrow(0, rank * (rank + 1) / 2, rank + 1));
      c.expect(out2, cat(expected), "all_to_all_single with splits");
      // Lists: inputs[j] (shape [j + 1, 2]) goes to rank j; outputs[j] ([rank + 1, 2]) comes from j.
      std::vector<Tensor> ins, outs;
      for (int j = 0; j < size; ++j) {
        ins.push_back(c.input(rank, dt, {j + 1, 2}, ReduceOp::SUM, j));
        outs.push_back(empty({rank + 1, 2}, TensorOptions(dt).device(c.device)));
      }
      c.pg->all_to_all(outs, ins)->wait();
      for (int j = 0; j < size; ++j)
        c.expect(outs[j], c.input(j, dt, {rank + 1, 2}, ReduceOp::SUM, rank),
                 "all_to_all from " + std::to_string(j));
    }
}

// A ring (even ranks send first, odd ones receive first, so that blocking NCCL sends pair up),
// then rank 0 to every other rank.
void check_send_recv(Checker& c) {
  int rank = c.rank, size = c.size, next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (int64_t n : c.numels)
    for (ScalarType dt : kDtypes) {
      Tensor got = empty({n}, TensorOptions(dt).device(c.device));
      for (int phase = 0; phase < 2; ++phase) {
        if ((phase == 0) == (rank % 2 == 0))
          c.pg->send(c.input(rank, dt, {n}), next)->wait();
        else
          c.pg->recv(got, prev)->wait();
      }
      c.expect(got, c.input(prev, dt, {n}), "send/recv around the ring");
      if (rank == 0) {
        for (int r = 1; r < size; ++r) c.pg->send(c.input(0, dt, {n}, ReduceOp::SUM, r), r)->wait();
      } else {
        Tensor from0 = empty({n}, TensorOptions(dt).device(c.device));
        c.pg->recv(from0, 0)->wait();
        c.expect(from0, c.input(0, dt, {n}, ReduceOp::SUM, rank), "send/recv from rank 0");
      }
    }
}

// The last rank arrives 300 ms late: nobody leaves the barrier before it (with 100 ms to spare
// for the ranks' skew after the all-reduce that lines them up).
void check_barrier(Checker& c) {
  Tensor t = c.input(c.rank, kFloat32, {1});
  c.pg->all_reduce(t)->wait();
  c.expect(t, c.reference([&](int r) { return c.input(r, kFloat32, {1}); }, ReduceOp::SUM),
           "barrier's all_reduce");
  auto start = std::chrono::steady_clock::now();
  if (c.rank == c.size - 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  c.pg->barrier()->wait();
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  if (c.size > 1 && ms < 200) {
    ++c.failures;
    std::fprintf(stderr,
                 "[rank %d] FAIL barrier: left after %lld ms, before the last rank arrived (300 ms)\n",
                 c.rank, static_cast<long long>(ms));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = ember::cuda::is_available() ? "nccl" : "gloo";
  std::vector<int64_t> extra;
  std::string fault;
  ember::tools::ArgParser args("collectives_check");
  args.option("--backend", &backend, "nccl or gloo")
      .option("--numel", &extra, "extra tensor sizes to check (repeatable)")
      .option("--inject-fault", &fault, "break one collective on purpose, to see the check fail");
  if (std::optional<int> exit_code = args.parse_or_exit_code(argc, argv)) return *exit_code;
  if (backend != "nccl" && backend != "gloo") return args.fail("unknown backend " + backend);
  try {
    Checker c;
    c.fault = fault;
    if (backend == "nccl") {
      ember::cuda::set_device(d::get_node_local_rank());
      c.device = Device(kCUDA, d::get_node_local_rank());
    }
    d::init_process_group(backend);
    c.pg = d::default_group();
    c.rank = c.pg->rank();
    c.size = c.pg->size();
    for (int64_t n : extra) {
      if (n < 1) return args.fail("--numel needs a positive number of elements");
      c.numels.push_back(n);
    }
    if (c.rank == 0)
      std::printf("collectives_check: %s, world size %d, %s tensors\n", backend.c_str(), c.size,
                  ember::detail::str_cat(c.device).c_str());
    const std::vector<std::pair<const char*, void (*)(Checker&)>> checks = {
        {"all_reduce", check_all_reduce},
        {"broadcast", check_broadcast},
        {"reduce", check_reduce},
        {"all_gather", check_all_gather},
        {"reduce_scatter", check_reduce_scatter},
        {"all_to_all", check_all_to_all},
        {"send/recv", check_send_recv},
        {"barrier", check_barrier}};
    int64_t failed = 0;
    for (auto [name, check] : checks) {
      c.failures = 0;
      try {
        check(c);
      } catch (const std::exception& e) {
        ++c.failures;
        std::fprintf(stderr, "[rank %d] FAIL %s: %s\n", c.rank, name, e.what());
      }
      // Every rank's count, summed (a broken group fails here too, and the check with it).
      Tensor total = full({1}, static_cast<double>(c.failures), TensorOptions(kFloat32).device(c.device));
      c.pg->all_reduce(total)->wait();
      int64_t n = static_cast<int64_t>(total.cpu().item<double>());
      if (c.rank == 0) {
        if (n == 0)
          std::printf("PASS %s\n", name);
        else
          std::printf("FAIL %s (%lld mismatches over the ranks)\n", name, static_cast<long long>(n));
        std::fflush(stdout);
      }
      failed += n;
    }
    d::destroy_process_group();
    return failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collectives_check: %s\n", e.what());
    return 1;
  }
}
