// How much DistributedDataParallel costs per step, and how much of its communication hides
// behind backward. Run under emberrun (one process per rank); rank 0 prints one JSON line per
// model: median ms of backward and of a whole SGD step without and with DDP, and of the
// all-reduce alone of the same gradients (one flat buffer, and DDP's buckets one after another).
// exposed_comm_ms = backward with DDP - backward without; hidden = 1 - exposed / all-reduce.
//
//   OMP_NUM_THREADS=1 emberrun --nproc-per-node 2 ddp_bench [--device cpu|cuda] [--model mlp|transformer]
//       [--width 512] [--layers 8] [--batch 32] [--iters 20] [--bucket-mb 25] [--gradient-as-bucket-view 0|1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ember/cuda/device.h>
#include <ember/distributed/ddp.h>
#include <ember/distributed/distributed.h>
#include <ember/ember.h>
#include <ember/tools/common/arg_parser.h>

using namespace ember;
namespace dist = ember::distributed;

namespace {

struct Args {
  std::string device = "cpu", model = "mlp";
  int64_t width = 512, layers = 8, batch = 32;
  int iters = 20;
  double bucket_mb = 25;
  int gradient_as_bucket_view = 0;
};

// Returns nullopt for --help (usage printed).
std::optional<Args> parse(int argc, char** argv) {
  Args a;
  tools::ArgParser args("ddp_bench");
  args.option("--device", &a.device, "cpu or cuda")
      .option("--model", &a.model, "mlp or transformer")
      .option("--width", &a.width, "features of each block")
      .option("--layers", &a.layers, "blocks")
      .option("--batch", &a.batch, "rows per rank and step")
      .option("--iters", &a.iters, "timed steps")
      .option("--bucket-mb", &a.bucket_mb, "DDP's bucket size in MiB")
      .option("--gradient-as-bucket-view", &a.gradient_as_bucket_view,
              "1: DDP's gradients are views of its buckets (no copies in and out)");
  if (!args.parse(argc, argv)) return std::nullopt;
  EMBER_CHECK(a.device == "cpu" || a.device == "cuda", "ddp_bench: --device is cpu or cuda, got ", a.device);
  EMBER_CHECK(a.model == "mlp" || a.model == "transformer", "ddp_bench: --model is mlp or transformer, got ",
              a.model);
  EMBER_CHECK(a.gradient_as_bucket_view == 0 || a.gradient_as_bucket_view == 1,
              "ddp_bench: --gradient-as-bucket-view is 0 or 1, got ", a.gradient_as_bucket_view);
  return a;
}

// `layers` blocks of width `width`: Linear + GELU, or transformer encoder layers (8 heads) over
// sequences of 64 tokens.
struct BenchNetImpl : nn::Module {
  BenchNetImpl(const Args& a) : transformer(a.model == "transformer") {
    for (int64_t i = 0; i < a.layers; ++i) {
      std::string name = "layer" + std::to_string(i);
      if (transformer)
        blocks.push_back(
            register_module(name, nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(a.width, 8)
                                                                  .dim_feedforward(4 * a.width)
                                                                  .batch_first(true)))
                .ptr());
      else
        blocks.push_back(register_module(name, nn::Linear(a.width, a.width)).ptr());
    }
  }
  Tensor forward(Tensor x) {
    for (auto& b : blocks) {
      if (transformer)
        x = std::static_pointer_cast<nn::TransformerEncoderLayerImpl>(b)->forward(x);
      else
        x = gelu(std::static_pointer_cast<nn::LinearImpl>(b)->forward(x));
    }
    return x;
  }
  bool transformer;
  std::vector<std::shared_ptr<nn::Module>> blocks;
};
EMBER_MODULE(BenchNet);

void sync(const Device& device) {
  if (device.is_cuda()) cuda::synchronize();
}

// Median ms of `timed` over `iters` runs (after 3 untimed), each after an untimed `setup`; every
// rank starts each run together.
double median_ms(int iters, const Device& device, const std::function<void()>& setup,
                 const std::function<void()>& timed) {
  std::vector<double> ms;
  for (int i = 0; i < iters + 3; ++i) {
    setup();
    sync(device);
    dist::barrier();
    auto t0 = std::chrono::steady_clock::now();
    timed();
    sync(device);
    auto t1 = std::chrono::steady_clock::now();
    if (i >= 3) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::optional<Args> parsed = parse(argc, argv);
    if (!parsed) return 0;
    const Args& a = *parsed;
    Device device(kCPU);
    if (a.device == "cuda") {
      const char* local_rank = std::getenv("LOCAL_RANK");  // emberrun's; the group is not made yet
      device = Device(kCUDA, local_rank ? std::atoi(local_rank) : 0);
      cuda::set_device(device.index);
    }
    dist::init_process_group(a.device == "cuda" ? "nccl" : "gloo");
    int rank = dist::get_rank(), world = dist::get_world_size();

    manual_seed(0);
    BenchNet plain(a), wrapped(a);
    plain->to(device);
    wrapped->to(device);
    dist::DistributedDataParallel ddp(wrapped, nullptr,
                                      dist::DistributedDataParallelOptions()
                                          .bucket_cap_mb(a.bucket_mb)
                                          .gradient_as_bucket_view(a.gradient_as_bucket_view == 1));
    std::vector<int64_t> shape = a.model == "transformer" ? std::vector<int64_t>{a.batch, 64, a.width}
                                                          : std::vector<int64_t>{a.batch, a.width};
    Tensor x = randn(shape).to(device), y = randn(shape).to(device);

    Tensor loss;
    auto timed_backward = [&](const std::function<Tensor()>& forward) {
      return median_ms(
          a.iters, device,
          [&] {
            plain->zero_grad();
            wrapped->zero_grad();
            loss = mse_loss(forward(), y);
          },
          [&] { loss.backward(); });
    };
    auto plain_forward = [&] { return plain(x); };
    auto ddp_forward = [&] { return ddp(x); };
    double bwd_plain = timed_backward(plain_forward);
    double bwd_ddp = timed_backward(ddp_forward);

    optim::SGD plain_opt(plain->parameters(), 0.01), ddp_opt(ddp->parameters(), 0.01);
    auto timed_step = [&](optim::SGD& opt, const std::function<Tensor()>& forward) {
      return median_ms(
          a.iters, device, [] {},
          [&] {
            opt.zero_grad();
            mse_loss(forward(), y).backward();
            opt.step();
          });
    };
    double step_plain = timed_step(plain_opt, plain_forward);
    double step_ddp = timed_step(ddp_opt, ddp_forward);

    // The same bytes on their own: one flat buffer, and DDP's buckets launched then waited.
    int64_t numel = 0;
    std::vector<Tensor> bucket_buffers;
    std::vector<Tensor> params = wrapped->parameters();
    for (const auto& bucket : ddp->bucket_indices()) {
      int64_t n = 0;
      for (size_t i : bucket) n += params[i].numel();
      bucket_buffers.push_back(zeros({n}, TensorOptions(params[0].dtype()).device(device)));
      numel += n;
    }
    Tensor flat = zeros({numel}, TensorOptions(params[0].dtype()).device(device));
    double ar_flat = median_ms(
        a.iters, device, [] {}, [&] { dist::all_reduce(flat, dist::ReduceOp::AVG); });
    double ar_buckets = median_ms(
        a.iters, device, [] {},
        [&] {
          std::vector<std::shared_ptr<dist::Work>> works;
          for (const Tensor& b : bucket_buffers)
            works.push_back(dist::all_reduce(b, dist::ReduceOp::AVG, nullptr, true));
          for (auto& w : works) w->wait();
        });

    if (rank == 0) {
      double exposed = bwd_ddp - bwd_plain;
      std::printf(
          "{\"model\": \"%s\", \"device\": \"%s\", \"world\": %d, \"width\": %lld, \"layers\": %lld, "
          "\"batch\": %lld, \"grad_mb\": %.2f, \"buckets\": %zu, \"gradient_as_bucket_view\": %d, "
          "\"backward_ms\": %.3f, \"backward_ddp_ms\": %.3f, \"step_ms\": %.3f, \"step_ddp_ms\": %.3f, "
          "\"allreduce_flat_ms\": %.3f, \"allreduce_buckets_ms\": %.3f, \"exposed_comm_ms\": %.3f, "
          "\"hidden_fraction\": %.2f}\n",
          a.model.c_str(), a.device.c_str(), world, static_cast<long long>(a.width),
          static_cast<long long>(a.layers), static_cast<long long>(a.batch),
          numel * params[0].element_size() / 1048576.0, bucket_buffers.size(), a.gradient_as_bucket_view,
          bwd_plain, bwd_ddp, step_plain, step_ddp, ar_flat, ar_buckets, exposed,
          1.0 - std::max(exposed, 0.0) / ar_buckets);
      std::fflush(stdout);
    }
    dist::destroy_process_group();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
