// Weak scaling of a training step (issue 8): every rank trains on its own `--batch` for
// --warmup + --iters steps, so the step time stays flat when communication hides behind
// backward. Run at world 1 and N under emberrun; efficiency = samples_per_s(N) / (N *
// samples_per_s(1)). tools/bench/torch_scaling_bench.py is the same under torchrun, and
// scripts/multi_gpu_check.sh prints both sides' efficiencies.
//   --model resnet50 (or resnet18/34/101): examples/models/resnet.h, random images [batch, 3,
//       image_size, image_size] and labels, cross-entropy, SGD (lr 0.1, momentum 0.9, weight decay
//       1e-4), NCHW unless --channels-last (both sides).
//   --model bert-base: examples/models/bert.h's BertLike (transformer_bench's model) on random
//       tokens [batch, seq], AdamW (lr 1e-4, weight decay 0.01).
// Both: bf16 autocast (--precision f32 for none), fused optimizer steps on CUDA (ember's default
// for CUDA parameters; PyTorch's side passes fused=True), cuDNN benchmark mode on, data made on
// the device once, DistributedDataParallel (default options) only when the world has more than
// one rank (PyTorch's side likewise). Each step is timed to the device's completion; rank 0
// prints {"case": "scaling resnet50 bf16 b128 world N", "ms": median, "samples_per_s": global,
// "peak_mib": the peak of allocated memory over the timed steps}.
//
// --cuda-graphs (world 1, CUDA): the step is captured into a CUDA graph after the warm-up and the
// timed steps replay it (torch_scaling_bench.py --cuda-graphs: torch.cuda.graph). --profile: one
// more eager step under ember's profiler, its kernel tables to stderr.
//   emberrun --nproc-per-node N scaling_bench [--model resnet50|bert-base] [--batch 128|32]
//       [--seq 128] [--iters 20] [--warmup 10] [--device cuda|cpu] [--channels-last] [--cuda-graphs]
//   OMP_NUM_THREADS=1 emberrun --nproc-per-node 2 scaling_bench --device cpu --model resnet18
//       --batch 2 --image-size 32 --iters 2 --warmup 1      # small, on the CPU (Gloo)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ember/cuda/caching_allocator.h>
#include <ember/cuda/conv_cudnn.h>
#include <ember/cuda/graph.h>
#include <ember/distributed/ddp.h>
#include <ember/distributed/distributed.h>
#include <ember/ember.h>
#include <ember/examples/models/bert.h>
#include <ember/examples/models/resnet.h>
#include <ember/tools/common/arg_parser.h>

#include "profile_step.h"

using namespace ember;
namespace dist = ember::distributed;

namespace {

struct Args {
  std::string model = "resnet50", precision = "bf16", device = "cuda";
  int64_t batch = 0, seq = 128, image_size = 224, num_classes = 1000;
  int64_t layers = 12, d_model = 768, heads = 12, ffn = 3072, vocab = 30522;
  int warmup = 10, iters = 20;
  bool channels_last = false, cuda_graphs = false, profile = false;
  bool bert() const { return model == "bert-base"; }
};

// Returns nullopt for --help (usage printed).
std::optional<Args> parse(int argc, char** argv) {
  Args a;
  tools::ArgParser args("scaling_bench");
  args.option("--model", &a.model, "resnet18, resnet34, resnet50, resnet101 or bert-base")
      .option("--batch", &a.batch, "samples per rank and step (0: 128 for a ResNet, 32 for BERT)")
      .option("--seq", &a.seq, "BERT: tokens per sequence")
      .option("--image-size", &a.image_size, "ResNet: image height and width")
      .option("--num-classes", &a.num_classes, "ResNet: classes")
      .option("--layers", &a.layers, "BERT: encoder layers")
      .option("--d-model", &a.d_model, "BERT: model width")
      .option("--heads", &a.heads, "BERT: attention heads")
      .option("--ffn", &a.ffn, "BERT: feed-forward width")
      .option("--vocab", &a.vocab, "BERT: vocabulary size")
      .option("--warmup", &a.warmup, "untimed steps")
      .option("--iters", &a.iters, "timed steps")
      .option("--precision", &a.precision, "bf16 (autocast) or f32")
      .option("--device", &a.device, "cuda or cpu")
      .flag("--channels-last", &a.channels_last, "ResNet: model and images in channels-last memory")
      .flag("--cuda-graphs", &a.cuda_graphs,
            "capture the step into a CUDA graph and time its replays (world 1)")
      .flag("--profile", &a.profile, "profile one more eager step (tables to stderr; world 1)");
  if (!args.parse(argc, argv)) return std::nullopt;
  const std::vector<std::string> models{"resnet18", "resnet34", "resnet50", "resnet101", "bert-base"};
  EMBER_CHECK(std::find(models.begin(), models.end(), a.model) != models.end(),
              "scaling_bench: --model is resnet18, resnet34, resnet50, resnet101 or bert-base, got ",
              a.model);
  EMBER_CHECK(a.precision == "bf16" || a.precision == "f32",
              "scaling_bench: --precision is bf16 or f32, got ", a.precision);
  EMBER_CHECK(a.device == "cuda" || a.device == "cpu", "scaling_bench: --device is cuda or cpu, got ",
              a.device);
  EMBER_CHECK(a.iters > 0 && a.warmup >= 0 && a.batch >= 0, "scaling_bench: --iters must be positive and ",
              "--warmup, --batch not negative, got ", a.iters, ", ", a.warmup, ", ", a.batch);
  if (a.batch == 0) a.batch = a.bert() ? 32 : 128;
  return a;
}

models::ResNet make_resnet(const Args& a) {
  const auto options = models::ResNetOptions().num_classes(a.num_classes);
  if (a.model == "resnet18") return models::resnet18(options);
  if (a.model == "resnet34") return models::resnet34(options);
  if (a.model == "resnet101") return models::resnet101(options);
  return models::resnet50(options);
}

// What one step runs: `loss(m)` with m the model, or its DDP wrapper when `ddp` (both call as
// m(inputs...)).
template <class Holder, class Loss>
std::function<Tensor()> forward_of(Holder model, bool ddp, Loss loss) {
  if (!ddp) return [model, loss] { return loss(model); };
  dist::DistributedDataParallel wrapped(model);  // broadcasts rank 0's parameters
  return [wrapped, loss] { return loss(wrapped); };
}

void sync(const Device& device) {
  if (device.is_cuda()) cuda::synchronize();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::optional<Args> parsed = parse(argc, argv);
    if (!parsed) return 0;
    const Args& a = *parsed;
    Device device(kCPU);
    if (a.device == "cuda") {
      device = Device(kCUDA, dist::get_node_local_rank(/*fallback_rank=*/0));  // 0 without emberrun
      cuda::set_device(device.index);
      cuda::cudnn::set_benchmark(true);
    }
    // As torch_scaling_bench.py: a process group only when the job has several ranks, so that
    // world 1 runs the plain step and the program also runs without emberrun.
    const char* world_env = std::getenv("WORLD_SIZE");
    const bool ddp = world_env && std::atoi(world_env) > 1;
    if (ddp) dist::init_process_group(a.device == "cuda" ? "nccl" : "gloo");
    const int rank = ddp ? dist::get_rank() : 0, world = ddp ? dist::get_world_size() : 1;

    manual_seed(0);
    std::function<Tensor()> forward;
    std::unique_ptr<optim::Optimizer> opt;
    if (a.bert()) {
      models::BertLike model(models::BertLikeOptions()
                                 .vocab_size(a.vocab)
                                 .max_positions(a.seq)
                                 .d_model(a.d_model)
                                 .heads(a.heads)
                                 .dim_feedforward(a.ffn)
                                 .layers(a.layers));
      model->to(device);
      const auto int64 = TensorOptions(kInt64).device(device);
      Tensor ids = randint(0, a.vocab, {a.batch, a.seq}, int64),
             labels = randint(0, a.vocab, {a.batch, a.seq}, int64);
      Tensor positions = arange(a.seq, int64);
      forward = forward_of(model, ddp, [=](auto& m) { return m(ids, positions, labels, false); });
      opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions(1e-4).weight_decay(0.01));
    } else {
      models::ResNet model = make_resnet(a);
      model->to(device);
      const MemoryFormat format = a.channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
      model->to(format);
      Tensor images =
          randn({a.batch, 3, a.image_size, a.image_size}, TensorOptions().device(device)).contiguous(format);
      Tensor labels = randint(0, a.num_classes, {a.batch}, TensorOptions(kInt64).device(device));
      forward = forward_of(model, ddp, [=](auto& m) { return cross_entropy(m(images), labels); });
      opt = std::make_unique<optim::SGD>(model->parameters(),
                                         optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-4));
    }

    auto step = [&] {
      opt->zero_grad();
      Tensor loss;
      {
        amp::AutocastGuard autocast(device.type, kBFloat16, /*enabled=*/a.precision == "bf16");
        loss = forward();
      }
      loss.backward();
      opt->step();
    };
    for (int i = 0; i < a.warmup; ++i) step();
    sync(device);
    if (ddp) dist::barrier();
    EMBER_CHECK(!a.cuda_graphs || (device.is_cuda() && !ddp),
                "scaling_bench: --cuda-graphs needs CUDA and world 1");
    EMBER_CHECK(!a.profile || !ddp, "scaling_bench: --profile needs world 1");
    cuda::CUDAGraph graph;
    if (a.cuda_graphs) {
      cuda::graph capture(graph);
      step();
    }
    if (device.is_cuda()) cuda::reset_peak_memory_stats();
    std::vector<double> ms;
    for (int i = 0; i < a.iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      if (a.cuda_graphs)
        graph.replay();
      else
        step();
      sync(device);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    if (rank == 0) {
      std::string name = "scaling " + a.model + " " + a.precision + " b" + std::to_string(a.batch) +
                         (a.bert()          ? " s" + std::to_string(a.seq)
                          : a.channels_last ? " nhwc"
                                            : "") +
                         " world " + std::to_string(world) + (a.cuda_graphs ? " graph" : "");
      // The peak of allocated memory over the timed steps (from the warm-up's end), in MiB.
      const double peak = device.is_cuda() ? static_cast<double>(cuda::max_memory_allocated()) / (1 << 20) : -1;
      std::printf("{\"case\": \"%s\", \"ms\": %.3f, \"samples_per_s\": %.1f, \"peak_mib\": %.0f}\n",
                  name.c_str(), median, static_cast<double>(world * a.batch) / median * 1000, peak);
      std::fflush(stdout);
      if (a.profile) bench::profile_step(device, name, step);
    }
    if (ddp) dist::destroy_process_group();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
