// A long training run that watches its own memory (issue 25's long runs): a small BERT-style
// encoder (examples/models/bert.h) trained with AdamW, gradient clipping and a step LR schedule
// on random tokens for --steps steps, printing every --every steps the process's resident set
// (/proc/self/statm) and, on CUDA, the caching allocator's allocated and reserved bytes. The last
// line is the growth per 1,000 steps between the first report and the last: about 0 when
// nothing leaks.
//   long_run [--steps 10000] [--every 1000] [--device cpu|cuda] [--bf16]
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>

#include <ember/cuda/caching_allocator.h>
#include <ember/ember.h>
#include <ember/examples/models/bert.h>
#include <ember/tools/common/arg_parser.h>

using namespace ember;

namespace {

struct Config {
  int64_t steps = 10000, every = 1000;
  std::string device = "cpu";
  bool bf16 = false;
};

double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

struct Sample {
  int64_t step;
  double rss, allocated, reserved;  // MiB; the last two -1 on the CPU
};

Sample sample(int64_t step, const Device& device) {
  Sample s{step, rss_mib(), -1, -1};
  if (device.is_cuda()) {
    cuda::synchronize();
    s.allocated = static_cast<double>(cuda::memory_allocated()) / (1 << 20);
    s.reserved = static_cast<double>(cuda::memory_reserved()) / (1 << 20);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Config c;
    tools::ArgParser args("long_run");
    args.option("--steps", &c.steps, "training steps")
        .option("--every", &c.every, "steps between memory reports")
        .option("--device", &c.device, "cpu or cuda")
        .flag("--bf16", &c.bf16, "the forward under bf16 autocast");
    if (!args.parse(argc, argv)) return 0;
    EMBER_CHECK(c.steps > 0 && c.every > 0, "long_run: --steps and --every must be positive");
    const Device device(c.device);
    manual_seed(0);
    const int64_t vocab = 1000, batch = 8, seq = 32;
    models::BertLike model(models::BertLikeOptions()
                               .vocab_size(vocab)
                               .max_positions(seq)
                               .d_model(64)
                               .heads(4)
                               .dim_feedforward(128)
                               .layers(2));
    model->to(device);
    optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-3).weight_decay(0.01));
    optim::StepLR schedule(opt, /*step_size=*/1000, /*gamma=*/0.9);
    const TensorOptions ids = TensorOptions(kInt64).device(device);
    const Tensor positions = arange(seq, ids);
    std::optional<Sample> first;
    Sample last{};
    double loss = 0;
    for (int64_t step = 1; step <= c.steps; ++step) {
      Tensor tokens = randint(0, vocab, {batch, seq}, ids), labels = randint(0, vocab, {batch, seq}, ids);
      opt.zero_grad();
      Tensor l;
      {
        std::optional<amp::AutocastGuard> autocast;
        if (c.bf16) autocast.emplace(device.type, kBFloat16);
        l = model(tokens, positions, labels);
      }
      l.backward();
      nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      opt.step();
      schedule.step();
      if (step % c.every == 0 || step == c.steps) {
        loss = l.item<double>();
        last = sample(step, device);
        if (!first) first = last;
        std::printf("step %lld: loss %.4f, rss %.1f MiB", static_cast<long long>(step), loss, last.rss);
        if (last.allocated >= 0)
          std::printf(", allocated %.1f MiB, reserved %.1f MiB", last.allocated, last.reserved);
        std::printf("\n");
        std::fflush(stdout);
      }
    }
    const double per_1000 =
        last.step > first->step ? 1000.0 / static_cast<double>(last.step - first->step) : 0;
    std::printf("growth per 1000 steps after step %lld: rss %+.3f MiB", static_cast<long long>(first->step),
                (last.rss - first->rss) * per_1000);
    if (last.allocated >= 0)
      std::printf(", allocated %+.3f MiB, reserved %+.3f MiB", (last.allocated - first->allocated) * per_1000,
                  (last.reserved - first->reserved) * per_1000);
    std::printf("\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "long_run: %s\n", e.what());
    return 1;
  }
}
