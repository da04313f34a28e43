// Pretrains the BERT-style model (examples/models/bert.h) with data, pipeline and tensor
// parallelism under emberrun. The world is a {dp, pp, tp} device mesh: dp replicas of the model,
// each cut into pp pipeline stages (Schedule1F1B over --microbatches), each stage split
// Megatron-style over tp ranks (vocabulary, heads, feed-forward units). The replicas' gradients
// are averaged: by DistributedDataParallel, or after the pipeline's step when there is one.
//
//   emberrun --nproc-per-node 4 train_bert_parallel --tensor-parallel 2     # DP 2 x TP 2
//   emberrun --nproc-per-node 2 train_bert_parallel --pipeline-parallel 2   # two stages
//   emberrun --nproc-per-node 8 train_bert_parallel --pipeline-parallel 2 --tensor-parallel 2
//   emberrun --nproc-per-node 4 train_bert_parallel --tensor-parallel 4 --sequence-parallel
//   train_bert_parallel                                                     # one process
//   OMP_NUM_THREADS=1 emberrun --nproc-per-node 4 train_bert_parallel --device cpu   # Gloo
//
// The task is masked-language modelling on sequences whose second half repeats the first: a masked
// token is recovered from its copy, which attention has to learn to find. Every rank draws the
// step's whole batch from (seed, step) and takes its replica's rows, so a run gives the same losses
// whatever its mesh (up to float rounding) as long as the global batch is the same:
// tests/examples/test_train_bert_parallel.cpp checks meshes of up to 3 dims against one process.
// Rank 0 prints the loss, averaged over the replicas, every --log-every steps.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <ember/distributed/ddp.h>
#include <ember/distributed/device_mesh.h>
#include <ember/distributed/distributed.h>
#include <ember/distributed/pipeline.h>
#include <ember/ember.h>
#include <ember/examples/common/launch.h>
#include <ember/examples/models/bert.h>
#include <ember/tools/common/arg_parser.h>

using namespace ember;
namespace dist = ember::distributed;

namespace {

constexpr int64_t kMaskId = 1;     // the [MASK] token
constexpr int64_t kFirstWord = 5;  // ids below are special tokens

struct Args {
  int64_t tensor_parallel = 1, pipeline_parallel = 1, microbatches = 4, steps = 600, batch = 32, seq = 32,
          layers = 2, d_model = 128, heads = 4, ffn = 512, vocab = 512, seed = 0, log_every = 25;
  double lr = 2e-3, dropout = 0, mask_fraction = 0.15, max_final_loss = 0;
  bool sequence_parallel = false;
  std::string device;
};

// The step's global batch: ids [batch, seq] with a fixed count of masked positions per row (so
// each replica's mean loss weighs alike), labels -100 except there.
struct Batch {
  Tensor ids, labels;
};

Batch make_batch(const Args& a, int64_t step) {
  Generator gen(static_cast<uint64_t>(a.seed) * 1000003 + static_cast<uint64_t>(step));
  Tensor half = randint(kFirstWord, a.vocab, {a.batch, a.seq / 2}, kInt64, &gen);
  Tensor ids = cat({half, half}, 1);
  const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(a.mask_fraction * static_cast<double>(a.seq)));
  Tensor masked = std::get<1>(topk(rand({a.batch, a.seq}, kFloat32, &gen), k, 1));
  Tensor labels = scatter(full({a.batch, a.seq}, -100, kInt64), 1, masked, gather(ids, 1, masked));
  return {scatter(ids, 1, masked, Scalar(kMaskId)), labels};
}

// The replicas' mean of each gradient (what DDP does during backward; a pipeline's backward runs
// in its schedule, so there it comes after).
void average_gradients(const std::vector<Tensor>& params, const std::shared_ptr<dist::ProcessGroup>& group) {
  for (const Tensor& p : params)
    if (p.grad().defined()) dist::all_reduce(p.grad(), dist::ReduceOp::AVG, group);
}

int run(const Args& a) {
  const examples::Launch l = examples::init_launch(a.device);
  const int64_t tp = a.tensor_parallel, pp = a.pipeline_parallel;
  EMBER_CHECK(tp >= 1 && pp >= 1 && l.world_size % (tp * pp) == 0, "train_bert_parallel: --tensor-parallel ",
              tp, " x --pipeline-parallel ", pp, " must divide the world size ", l.world_size);
  EMBER_CHECK(!a.sequence_parallel || tp > 1,
              "train_bert_parallel: --sequence-parallel needs --tensor-parallel > 1");
  const int64_t dp = l.world_size / (tp * pp);
  const int64_t microbatches = pp > 1 ? a.microbatches : 1;
  EMBER_CHECK(a.batch % (dp * microbatches) == 0, "train_bert_parallel: --batch ", a.batch,
              " must divide by the ", dp, " data-parallel replicas x ", microbatches, " micro-batches");
  EMBER_CHECK(a.seq % 2 == 0, "train_bert_parallel: --seq must be even (its second half repeats the first)");
  std::optional<dist::DeviceMesh> mesh;
  if (l.distributed())
    mesh = dist::init_device_mesh(l.device.is_cuda() ? "cuda" : "cpu", {dp, pp, tp}, {"dp", "pp", "tp"});
  const int64_t replica = mesh ? mesh->get_local_rank("dp") : 0;

  // The same seed everywhere: every replica starts from the same weights, and each rank keeps
  // its stage's shards of them.
  manual_seed(static_cast<uint64_t>(a.seed));
  auto options = models::BertLikeOptions()
                     .vocab_size(a.vocab)
                     .max_positions(a.seq)
                     .d_model(a.d_model)
                     .heads(a.heads)
                     .dim_feedforward(a.ffn)
                     .layers(a.layers)
                     .dropout(a.dropout);
  if (tp > 1) options.tensor_parallel(mesh->get_group("tp")).sequence_parallel(a.sequence_parallel);
  if (pp > 1) options.pipeline_stage(mesh->get_local_rank("pp"), pp);
  models::BertLike model(options);
  model->to(l.device);
  std::optional<dist::DistributedDataParallel<models::BertLikeImpl>> ddp;
  if (dp > 1 && pp == 1) ddp.emplace(model, mesh->get_group("dp"));
  std::optional<dist::PipelineStage> stage;
  std::optional<dist::Schedule1F1B> schedule;
  if (pp > 1) {
    stage.emplace([model](const Tensor& x) { return model->forward_stage(x); }, mesh->get_group("pp"),
                  l.device);
    schedule.emplace(
        *stage, static_cast<int>(microbatches),
        [model](const Tensor& hidden, const Tensor& labels) { return model->loss(hidden, labels); });
  }
  const std::vector<Tensor> params = model->parameters();
  optim::AdamW opt(params, optim::AdamWOptions(a.lr).weight_decay(0.01));

  int64_t numel = 0;
  for (const Tensor& p : params) numel += p.numel();
  if (l.is_main())
    std::printf(
        "mesh: %lld data-parallel x %lld pipeline stages x %lld tensor-parallel%s on %s; %lld parameters on "
        "rank 0\n",
        static_cast<long long>(dp), static_cast<long long>(pp), static_cast<long long>(tp),
        a.sequence_parallel ? " (sequence parallel)" : "", l.device.str().c_str(),
        static_cast<long long>(numel));
  const Tensor positions = arange(a.seq, TensorOptions(kInt64).device(l.device));
  const int64_t rows = a.batch / dp;
  double loss_value = 0;
  model->train();
  for (int64_t step = 1; step <= a.steps; ++step) {
    Batch b = make_batch(a, step);
    Tensor ids = b.ids.narrow(0, replica * rows, rows).to(l.device);
    Tensor labels = b.labels.narrow(0, replica * rows, rows).to(l.device);
    opt.zero_grad();
    Tensor loss;
    if (schedule) {
      std::vector<Tensor> losses;
      if (stage->is_first())
        schedule->step(ids);
      else if (stage->is_last())
        schedule->step({}, labels, &losses);
      else
        schedule->step();
      // The replica's loss, from its last stage to every stage (0 elsewhere, summed).
      loss = stage->is_last() ? stack(losses).mean().detach() : zeros({}, TensorOptions().device(l.device));
      dist::all_reduce(loss, dist::ReduceOp::SUM, mesh->get_group("pp"));
      if (dp > 1) average_gradients(params, mesh->get_group("dp"));
    } else {
      loss = ddp ? (*ddp)(ids, positions, labels) : model(ids, positions, labels);
      loss.backward();
    }
    opt.step();
    if (step % a.log_every == 0 || step == a.steps) {
      Tensor mean = loss.detach().to(kFloat64);
      if (dp > 1) dist::all_reduce(mean, dist::ReduceOp::AVG, mesh->get_group("dp"));
      loss_value = mean.item<double>();
      if (l.is_main()) std::printf("step %lld loss %.6f\n", static_cast<long long>(step), loss_value);
    }
  }
  if (a.max_final_loss > 0 && loss_value > a.max_final_loss) {
    if (l.is_main())
      std::fprintf(stderr, "train_bert_parallel: final loss %.4f is above --max-final-loss %.4f\n",
                   loss_value, a.max_final_loss);
    return 1;
  }
  if (l.distributed()) dist::destroy_process_group();
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  Args a;
  tools::ArgParser p("train_bert_parallel");
  p.option("--tensor-parallel", &a.tensor_parallel, "ranks each stage's layers are split over")
      .flag("--sequence-parallel", &a.sequence_parallel,
            "with --tensor-parallel, split the sequence between the layers' blocks (--seq divides by it)")
      .option("--pipeline-parallel", &a.pipeline_parallel,
              "pipeline stages of each replica (at most --layers)")
      .option("--microbatches", &a.microbatches, "micro-batches per step of the pipeline (1F1B)")
      .option("--steps", &a.steps, "training steps")
      .option("--batch", &a.batch, "sequences per step, over all replicas")
      .option("--seq", &a.seq, "tokens per sequence (even)")
      .option("--layers", &a.layers, "encoder layers")
      .option("--d-model", &a.d_model, "model width")
      .option("--heads", &a.heads, "attention heads (divide by --tensor-parallel)")
      .option("--ffn", &a.ffn, "feed-forward width (divides by --tensor-parallel)")
      .option("--vocab", &a.vocab, "vocabulary size (divides by --tensor-parallel)")
      .option("--lr", &a.lr, "AdamW's learning rate")
      .option("--dropout", &a.dropout, "dropout of the embeddings and layers")
      .option("--mask-fraction", &a.mask_fraction, "share of each sequence's tokens masked")
      .option("--seed", &a.seed, "seed of the weights and the batches")
      .option("--log-every", &a.log_every, "steps between loss lines")
      .option("--max-final-loss", &a.max_final_loss,
              "fail (exit 1) if the last loss is above this (0: never)")
      .option("--device", &a.device, "cpu or cuda (default: cuda when there is a GPU)");
  if (std::optional<int> code = p.parse_or_exit_code(argc, argv)) return *code;
  return run(a);
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
