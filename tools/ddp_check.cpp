// Checks DistributedDataParallel and SyncBatchNorm at the job's world size N against one process
// that trains on the whole batch. Each rank trains on its share (B rows) of a seeded global batch
// (N * B rows, rank r's rows r*B ...); rank 0 also trains a copy of the model without DDP on the
// whole batch, and compares the parameters and buffers after --steps SGD steps. Prints one line
// per check (rank 0) and exits 1 when any failed:
//
//   PASS ddp_f32 max_diff=2.4e-07 tol=1e-05
//
//   emberrun --nproc-per-node 8 build/tools/ddp_check                              # NCCL on 8 GPUs
//   emberrun --nproc-per-node 2 build/tools/ddp_check --backend gloo --steps 5     # CPU
//
// Options: --backend nccl|gloo (default nccl when CUDA is available, else gloo), --device
// cuda|cpu (default cuda for NCCL, cpu for Gloo), --steps (50), --batch B (per rank, 16),
// --timeout-s (the process group's collective timeout, default 600).
//
// Checks (max_diff: the largest |difference| over every parameter and buffer, divided by the
// largest |reference value|, so it reads as a relative error):
//   ddp_f32         an MLP whose BatchNorm1d is a SyncBatchNorm under DDP, vs the same MLP with
//                   BatchNorm1d on the whole batch, float32. tol 1e-5: only the summation order
//                   differs (the all-reduce, the per-rank batch statistics).
//   ddp_bf16        the same under bfloat16 autocast. tol 1e-2: each rank's weight gradients
//                   are rounded to bfloat16 before the average, the reference's once.
//   no_sync         an MLP without batch norm, each step as 2 micro-batches (the first under
//                   no_sync, each loss halved) vs one step on the 2x batch. tol 1e-5.
//   sync_batch_norm SyncBatchNorm forward (output, running stats) and backward (input, weight
//                   and bias gradients summed over ranks) vs BatchNorm1d on the whole batch,
//                   [B, C, L] inputs, on every rank. tol 1e-5.
#include <ember/core/autocast_mode.h>
#include <ember/distributed/ddp.h>
#include <ember/distributed/distributed.h>
#include <ember/distributed/sync_batch_norm.h>
#include <ember/ember.h>
#include <ember/tools/common/arg_parser.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

namespace {

using namespace ember;
namespace d = ember::distributed;

constexpr int64_t kIn = 16, kHidden = 32, kOut = 4;

struct Args {
  std::string backend = cuda::is_available() ? "nccl" : "gloo";
  std::string device;
  int steps = 50;
  int64_t batch = 16;
  int timeout_s = 600;
};

// Linear -> norm -> tanh -> Linear -> tanh -> Linear. The norm is BatchNorm1d, SyncBatchNorm or
// none; every variant draws the same initial weights from the same seed.
enum class Norm { kNone, kBatchNorm, kSync };
struct MlpImpl : nn::Module {
  explicit MlpImpl(Norm norm) {
    fc1 = register_module("fc1", nn::Linear(kIn, kHidden));
    if (norm == Norm::kBatchNorm) {
      auto bn = register_module("norm", nn::BatchNorm1d(nn::BatchNormOptions(kHidden)));
      norm_fn = [bn](const Tensor& x) { return bn(x); };
    } else if (norm == Norm::kSync) {
      auto bn = register_module("norm", nn::SyncBatchNorm(nn::BatchNormOptions(kHidden)));
      norm_fn = [bn](const Tensor& x) { return bn(x); };
    }
    fc2 = register_module("fc2", nn::Linear(kHidden, kHidden));
    fc3 = register_module("fc3", nn::Linear(kHidden, kOut));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = fc1(x);
    if (norm_fn) h = norm_fn(h);
    return fc3(tanh(fc2(tanh(h))));
  }
  nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  std::function<Tensor(const Tensor&)> norm_fn;
};
EMBER_MODULE(Mlp);

struct Context {
  Args args;
  Device device{kCPU};
  int rank = 0, world = 1;
};

// Step `step`'s whole batch of `rows` rows, the same on every rank.
std::pair<Tensor, Tensor> global_batch(const Context& c, int step, int64_t rows) {
  manual_seed(1000 + step);
  Tensor x = randn({rows, kIn}), y = randn({rows, kOut});
  return {x.to(c.device), y.to(c.device)};
}

Mlp make_mlp(const Context& c, Norm norm) {
  manual_seed(7);  // the same initial weights for the DDP model (on every rank) and the reference
  Mlp m(norm);
  m->to(c.device);
  return m;
}

// max |a - e| over matching tensors, divided by max |e|.
double relative_diff(const std::vector<std::pair<Tensor, Tensor>>& pairs) {
  double diff = 0, scale = 0;
  for (const auto& [a, e] : pairs) {
    Tensor ad = a.detach().cpu().to(kFloat64), ed = e.detach().cpu().to(kFloat64);
    EMBER_CHECK(ad.sizes().equals(ed.sizes()), "ddp_check: shapes differ: ", ad.sizes(), " vs ", ed.sizes());
    if (ad.numel() == 0) continue;
    diff = std::max(diff, (ad - ed).abs().max().item<double>());
    scale = std::max(scale, ed.abs().max().item<double>());
  }
  return diff / std::max(scale, 1e-12);
}

// Every floating parameter and buffer of `a` with the one of the same name in `e`.
std::vector<std::pair<Tensor, Tensor>> state_pairs(const nn::Module& a, const nn::Module& e) {
  std::vector<std::pair<Tensor, Tensor>> out;
  for (auto named : {&nn::Module::named_parameters, &nn::Module::named_buffers}) {
    auto na = (a.*named)(true), ne = (e.*named)(true);
    EMBER_CHECK(na.size() == ne.size(), "ddp_check: the models have different state");
    for (size_t i = 0; i < na.size(); ++i) {
      const Tensor& t = na.items()[i].second;
      if (is_floating_point(t.dtype())) out.emplace_back(t, ne.items()[i].second);
    }
  }
  return out;
}

optim::SGD make_sgd(const nn::Module& m) {
  return optim::SGD(m.parameters(), optim::SGDOptions(0.05).momentum(0.9));
}

// ddp_f32 and ddp_bf16: `steps` SGD steps of the SyncBatchNorm MLP under DDP on this rank's rows,
// and on rank 0 of the BatchNorm1d MLP on all rows.
double check_ddp(const Context& c, bool bf16) {
  std::optional<ScalarType> autocast_dtype;
  if (bf16) autocast_dtype = kBFloat16;
  auto loss_of = [&](auto& model, const Tensor& x, const Tensor& y) {
    amp::AutocastGuard autocast(c.device.type, autocast_dtype, bf16);
    return mse_loss(model(x).to(kFloat32), y);
  };
  int64_t b = c.args.batch;
  Mlp net = make_mlp(c, Norm::kSync);
  d::DistributedDataParallel ddp(net);
  optim::SGD opt = make_sgd(*ddp);
  for (int s = 0; s < c.args.steps; ++s) {
    auto [x, y] = global_batch(c, s, c.world * b);
    opt.zero_grad();
    loss_of(ddp, x.narrow(0, c.rank * b, b), y.narrow(0, c.rank * b, b)).backward();
    opt.step();
  }
  if (c.rank != 0) return 0;
  Mlp ref = make_mlp(c, Norm::kBatchNorm);
  optim::SGD ref_opt = make_sgd(*ref);
  for (int s = 0; s < c.args.steps; ++s) {
    auto [x, y] = global_batch(c, s, c.world * b);
    ref_opt.zero_grad();
    loss_of(ref, x, y).backward();
    ref_opt.step();
  }
  return relative_diff(state_pairs(*net, *ref));
}

// no_sync: each step's 2 * N * B rows as two micro-batches per rank (micro-batch m of rank r:
// rows (m N + r) B ...), the first backward under no_sync, each loss halved so that the sum of
// the two matches the mean over the 2x batch.
double check_no_sync(const Context& c) {
  int64_t b = c.args.batch;
  Mlp net = make_mlp(c, Norm::kNone);
  d::DistributedDataParallel ddp(net);
  optim::SGD opt = make_sgd(*ddp);
  for (int s = 0; s < c.args.steps; ++s) {
    auto [x, y] = global_batch(c, s, 2 * c.world * b);
    auto micro = [&](int m) {
      int64_t start = (m * c.world + c.rank) * b;
      (mse_loss(ddp(x.narrow(0, start, b)), y.narrow(0, start, b)) * 0.5).backward();
    };
    opt.zero_grad();
    {
      auto guard = ddp->no_sync();
      micro(0);
    }
    micro(1);
    opt.step();
  }
  if (c.rank != 0) return 0;
  Mlp ref = make_mlp(c, Norm::kNone);
  optim::SGD ref_opt = make_sgd(*ref);
  for (int s = 0; s < c.args.steps; ++s) {
    auto [x, y] = global_batch(c, s, 2 * c.world * b);
    ref_opt.zero_grad();
    mse_loss(ref(x), y).backward();
    ref_opt.step();
  }
  return relative_diff(state_pairs(*net, *ref));
}

// sync_batch_norm, on every rank: this rank's output and input gradient against its rows of
// BatchNorm1d's on the whole batch; running stats and the weight and bias gradients (summed
// over the ranks) against BatchNorm1d's. Two forwards, so the running stats move twice.
double check_sync_batch_norm(const Context& c) {
  constexpr int64_t kC = 8, kL = 5;
  int64_t b = c.args.batch;
  nn::BatchNorm1d ref{nn::BatchNormOptions(kC)};
  ref->to(c.device);
  nn::SyncBatchNorm sync = nn::convert_sync_batchnorm(*ref.ptr());
  std::vector<std::pair<Tensor, Tensor>> pairs;
  for (int s = 0; s < 2; ++s) {
    manual_seed(2000 + s);
    Tensor x = (randn({c.world * b, kC, kL}) * 3 + 1).to(c.device),
           g = randn({c.world * b, kC, kL}).to(c.device);
    Tensor xr = x.narrow(0, c.rank * b, b).contiguous().requires_grad_(true);
    Tensor xf = x.clone().requires_grad_(true);
    sync->zero_grad();
    ref->zero_grad();
    Tensor out = sync(xr), ref_out = ref(xf);
    (out * g.narrow(0, c.rank * b, b)).sum().backward();
    (ref_out * g).sum().backward();
    pairs.emplace_back(out, ref_out.narrow(0, c.rank * b, b));
    pairs.emplace_back(xr.grad(), xf.grad().narrow(0, c.rank * b, b));
  }
  for (const Tensor& p : {sync->weight, sync->bias}) d::all_reduce(p.grad());
  pairs.emplace_back(sync->weight.grad(), ref->weight.grad());
  pairs.emplace_back(sync->bias.grad(), ref->bias.grad());
  pairs.emplace_back(sync->running_mean, ref->running_mean);
  pairs.emplace_back(sync->running_var, ref->running_var);
  return relative_diff(pairs);
}

}  // namespace

int main(int argc, char** argv) {
  Context c;
  Args& a = c.args;
  tools::ArgParser args("ddp_check");
  args.option("--backend", &a.backend, "nccl or gloo")
      .option("--device", &a.device, "cuda or cpu (default cuda for nccl, cpu for gloo)")
      .option("--steps", &a.steps, "training steps")
      .option("--batch", &a.batch, "rows per rank and step")
      .option("--timeout-s", &a.timeout_s, "the group's collective timeout in seconds");
  if (std::optional<int> exit_code = args.parse_or_exit_code(argc, argv)) return *exit_code;
  if (a.backend != "nccl" && a.backend != "gloo") return args.fail("unknown backend " + a.backend);
  if (a.device.empty()) a.device = a.backend == "nccl" ? "cuda" : "cpu";
  if (a.device != "cuda" && a.device != "cpu") return args.fail("unknown device " + a.device);
  if (a.steps < 1 || a.batch < 2 || a.timeout_s < 1)
    return args.fail("--steps and --timeout-s need a positive number, --batch at least 2");
  try {
    if (a.device == "cuda") {
      cuda::set_device(d::get_node_local_rank());
      c.device = Device(kCUDA, d::get_node_local_rank());
    }
    d::InitOptions init;
    init.timeout = std::chrono::seconds(a.timeout_s);
    d::init_process_group(a.backend, init);
    c.rank = d::get_rank();
    c.world = d::get_world_size();
    if (c.rank == 0)
      std::printf("ddp_check: %s, world size %d, %s, %d steps of %lld rows per rank\n", a.backend.c_str(),
                  c.world, ember::detail::str_cat(c.device).c_str(), a.steps,
                  static_cast<long long>(a.batch));
    struct Check {
      const char* name;
      double tol;
      std::function<double()> run;
      bool every_rank;  // each rank compares (the others leave the comparison to rank 0)
    };
    const std::vector<Check> checks = {
        {"ddp_f32", 1e-5, [&] { return check_ddp(c, false); }, false},
        {"ddp_bf16", 1e-2, [&] { return check_ddp(c, true); }, false},
        {"no_sync", 1e-5, [&] { return check_no_sync(c); }, false},
        {"sync_batch_norm", 1e-5, [&] { return check_sync_batch_norm(c); }, true},
    };
    int failed = 0;
    for (const Check& check : checks) {
      double diff = 0;
      std::string error;
      try {
        diff = check.run();
      } catch (const std::exception& e) {
        error = e.what();
      }
      // The worst over the ranks (NaN and errors count as failures); this also lines the ranks up
      // before the next check.
      bool bad = !error.empty() || !(diff <= check.tol);
      if (!error.empty()) std::fprintf(stderr, "[rank %d] %s: %s\n", c.rank, check.name, error.c_str());
      Tensor worst = tensor({bad ? 1.0 : 0.0, std::isnan(diff) ? 1e30 : diff}, kFloat64).to(c.device);
      d::all_reduce(worst, d::ReduceOp::MAX);
      Tensor w = worst.cpu();
      bad = w[0].item<double>() != 0;
      failed += bad;
      if (c.rank == 0) {
        std::printf("%s %s max_diff=%.3g tol=%.3g%s\n", bad ? "FAIL" : "PASS", check.name,
                    w[1].item<double>(), check.tol, check.every_rank ? " (worst rank)" : "");
        std::fflush(stdout);
      }
    }
    d::destroy_process_group();
    return failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddp_check: %s\n", e.what());
    return 1;
  }
}
