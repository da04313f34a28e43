// ember's side of the transformer training benchmark (issue 6): examples/models/bert.h's BertLike
// at BERT-base sizes (12 post-LN layers, d_model 768, 12 heads, FFN 3072, GELU, dropout 0.1, an
// MLM-style head over a 30522-word vocabulary), trained with AdamW (lr 1e-4, weight decay 0.01) on
// random tokens. tools/bench/torch_transformer_bench.py is the same model in PyTorch with the same
// arguments and output; compare.py prints the two side by side.
//
// Modes: f32, bf16 (autocast) and f16 (autocast + GradScaler), each also with "-ckpt": every
// encoder layer checkpointed, and with "-graph": the whole step (zero_grad, forward, backward,
// GradScaler, fused AdamW) is captured once into a CUDA graph after the warm-up steps, and the
// timed steps replay it (the peak then counts from the capture), and with "-flat": the parameters
// in one buffer (nn::utils::flatten_parameters_), so autocast casts them by one kernel per step
// (ember only; "bf16-flat-graph" combines them). Each mode prints one JSON line: the median
// step time in ms over
// --iters steps after --warmup (synchronized on CUDA), tokens/s, and on CUDA the peak of
// cuda::max_memory_allocated over the timed steps (reset between modes).
//   transformer_bench [--layers 12] [--batch 32] [--seq 512] [--d-model 768] [--heads 12]
//                     [--ffn 3072] [--vocab 30522] [--warmup 3] [--iters 10] [--device cuda]
//                     [--modes f32,f32-ckpt,bf16,bf16-ckpt,f16,f16-ckpt] [--profile [--trace PREFIX]]
//                     [--no-flash-sdp]
// --profile: after the timed steps of each mode, one more step runs under profiler::Profile and its
// tables (top 25 kernels and ops by self device time, self host time on the CPU; then the top 40 by kernel
// and input shapes) go to stderr, next to torch_transformer_bench.py --profile; --trace PREFIX also writes
// that step as a Chrome trace, PREFIX-<mode>.json.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <ember/cuda/attention_flash.h>
#include <ember/cuda/caching_allocator.h>
#include <ember/cuda/graph.h>
#include <ember/cuda/nvtx.h>
#include <ember/ember.h>
#include <ember/examples/models/bert.h>
#include <ember/tools/common/arg_parser.h>

#include "profile_step.h"

using namespace ember;

namespace {

struct Config {
  int64_t layers = 12, batch = 32, seq = 512, d_model = 768, heads = 12, ffn = 3072, vocab = 30522;
  int warmup = 3, iters = 10;
  bool profile = false, no_flash_sdp = false;
  std::string trace;
  std::string device = "cuda";
  std::string modes = "f32,f32-ckpt,bf16,bf16-ckpt,f16,f16-ckpt";
};

// Returns nullopt for --help (usage printed).
std::optional<Config> parse(int argc, char** argv) {
  Config c;
  tools::ArgParser args("transformer_bench");
  args.option("--layers", &c.layers, "encoder layers")
      .option("--batch", &c.batch, "sequences per step")
      .option("--seq", &c.seq, "tokens per sequence")
      .option("--d-model", &c.d_model, "model width")
      .option("--heads", &c.heads, "attention heads")
      .option("--ffn", &c.ffn, "feed-forward width")
      .option("--vocab", &c.vocab, "vocabulary size")
      .option("--warmup", &c.warmup, "untimed steps per mode")
      .option("--iters", &c.iters, "timed steps per mode")
      .option("--device", &c.device, "cuda or cpu")
      .option("--modes", &c.modes, "comma-separated modes")
      .flag("--profile", &c.profile, "profile one more step per mode (table to stderr)")
      .flag("--no-flash-sdp", &c.no_flash_sdp,
            "attention through cuDNN's kernels, not ember's for short sequences (cuda::enable_flash_sdp)")
      .option("--trace", &c.trace,
              "with --profile, also write that step as a Chrome trace to PREFIX-<mode>.json");
  if (!args.parse(argc, argv)) return std::nullopt;
  EMBER_CHECK(c.iters > 0, "transformer_bench: --iters must be positive");
  return c;
}

// One training step in a precision: "f32" plain; "bf16" and "f16" run the forward under autocast,
// and f16 scales the loss with the mode's GradScaler (disabled for the other modes, as in PyTorch's
// recipe: a disabled scaler passes everything through).
void train_step(const std::string& precision, const Device& device, optim::Optimizer& opt,
                amp::GradScaler& scaler, const std::function<Tensor()>& loss) {
  opt.zero_grad();
  Tensor l;
  {
    std::optional<amp::AutocastGuard> autocast;
    if (precision != "f32") autocast.emplace(device.type, precision == "bf16" ? kBFloat16 : kFloat16);
    l = loss();
  }
  scaler.scale(l).backward();
  scaler.step(opt);
  scaler.update();
}

void synchronize(const Device& device) {
  if (device.is_cuda()) cuda::synchronize();
}

// Median step time in ms and the peak allocated MiB (CUDA only, else -1), counted from the end of
// the warm-up unless `peak_from_warmup` is false.
std::pair<double, double> time_steps(const Config& c, const Device& device, const std::function<void()>& step,
                                     bool peak_from_warmup = true) {
  for (int i = 0; i < c.warmup; ++i) step();
  synchronize(device);
  if (device.is_cuda() && peak_from_warmup) cuda::reset_peak_memory_stats();
  std::vector<double> ms;
  // ncu's --nvtx-include "timed steps/" picks these steps' kernels (a replay's too) to sum.
  cuda::NvtxRange range("timed steps");
  for (int i = 0; i < c.iters; ++i) {
    auto start = std::chrono::steady_clock::now();
    step();
    synchronize(device);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  double peak = device.is_cuda() ? static_cast<double>(cuda::max_memory_allocated()) / (1 << 20) : -1;
  return {ms[ms.size() / 2], peak};
}

void run_mode(const Config& c, const Device& device, const std::string& mode) {
  std::stringstream parts(mode);
  std::string precision;
  std::getline(parts, precision, '-');
  bool ckpt = false, graphed = false, flat = false;
  for (std::string flag; std::getline(parts, flag, '-');) {
    EMBER_CHECK(flag == "ckpt" || flag == "graph" || flag == "flat", "transformer_bench: unknown mode ",
                mode);
    (flag == "ckpt" ? ckpt : flag == "graph" ? graphed : flat) = true;
  }
  EMBER_CHECK(precision == "f32" || precision == "bf16" || precision == "f16",
              "transformer_bench: unknown mode ", mode);
  std::ostringstream name;
  name << "transformer L" << c.layers << " b" << c.batch << " s" << c.seq << " " << precision
       << (ckpt ? " ckpt" : "") << (flat ? " flat" : "") << (graphed ? " graph" : "");
  try {
    manual_seed(0);
    models::BertLike model(models::BertLikeOptions()
                               .vocab_size(c.vocab)
                               .max_positions(c.seq)
                               .d_model(c.d_model)
                               .heads(c.heads)
                               .dim_feedforward(c.ffn)
                               .layers(c.layers));
    model->to(device);
    if (flat) nn::utils::flatten_parameters_(model->parameters());  // one cast per step, not 98
    model->train();
    optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-4).weight_decay(0.01));
    amp::GradScaler scaler(65536.0, 2.0, 0.5, 2000, /*enabled=*/precision == "f16");
    Tensor ids = randint(0, c.vocab, {c.batch, c.seq}, TensorOptions(kInt64).device(device));
    Tensor labels = randint(0, c.vocab, {c.batch, c.seq}, TensorOptions(kInt64).device(device));
    Tensor positions = arange(c.seq, TensorOptions(kInt64).device(device));
    auto step = [&] {
      train_step(precision, device, opt, scaler, [&] { return model(ids, positions, labels, ckpt); });
    };
    std::function<void()> timed = step;
    cuda::CUDAGraph graph;
    if (graphed) {
      for (int i = 0; i < c.warmup; ++i) step();
      synchronize(device);
      cuda::reset_peak_memory_stats();
      {
        cuda::graph capture(graph);
        step();
      }
      timed = [&] { graph.replay(); };
    }
    auto [ms, peak] = time_steps(c, device, timed, !graphed);
    // The profiler times kernels per op call: a replay makes none, so a graph mode has no table.
    if (c.profile && !graphed)
      bench::profile_step(device, name.str(), step, c.trace.empty() ? "" : c.trace + "-" + mode + ".json");
    std::printf("{\"case\": \"%s\", \"ms\": %.3f, \"tokens_per_s\": %.1f", name.str().c_str(), ms,
                static_cast<double>(c.batch * c.seq) / ms * 1000);
    if (peak >= 0) std::printf(", \"peak_mib\": %.0f", peak);
    std::printf("}\n");
  } catch (const Error& e) {
    std::printf("{\"case\": \"%s\", \"error\": \"%s\"}\n", name.str().c_str(), e.what());
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::optional<Config> parsed = parse(argc, argv);
    if (!parsed) return 0;
    const Config& c = *parsed;
    Device device(c.device);
    if (c.no_flash_sdp) cuda::enable_flash_sdp(false);
    std::stringstream modes(c.modes);
    for (std::string mode; std::getline(modes, mode, ',');) run_mode(c, device, mode);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
