// Trains a torchvision ResNet on real images, evaluates it each epoch, checkpoints, resumes and
// fine-tunes: torchvision's references/classification/train.py in C++. The README's main job runs
// it on Fashion-MNIST (Debian's dataset-fashion-mnist).
//
//   train_resnet --dataset fashion-mnist --epochs 15                       # one GPU (or the CPU)
//   train_resnet ... --checkpoint run/ckpt.safetensors --resume            # continue after a stop
//   train_resnet ... --cuda-graphs                     # the step replayed from a CUDA graph (one GPU)
//   train_resnet ... --model-ema                       # also evaluate an EMA of the weights
//   emberrun --nproc-per-node 8 train_resnet ... --sync-bn                 # DDP, one GPU each
//   train_resnet --dataset imagefolder --data-dir flowers --init-from resnet18.safetensors \
//                --num-classes 5 --backbone-lr-scale 0.1                   # fine-tune
//
// --dataset: fashion-mnist | mnist (IDX files in --data-dir), cifar10 | cifar100 (the binary
// version), imagefolder (--data-dir/train and --data-dir/val, one folder per class). Recipe:
// SGD (momentum, nesterov, no weight decay on biases and BatchNorm), linear warmup then cosine
// (or OneCycle) per step, label smoothing, bf16 autocast on the GPU. Rank 0 prints a progress bar
// and an epoch summary, writes metrics as JSON lines (--metrics, default next to the checkpoint)
// and the checkpoint each epoch (written atomically, with checksums). SIGTERM or SIGINT (a
// scheduler's preemption, emberrun's forwarded stop, Ctrl-C) writes the checkpoint after the
// current step and exits 0. Resuming restores the model, optimizer, scheduler, scaler and RNG
// states and the data loader's place in the epoch, and the data order and augmentation are
// functions of (seed, epoch, index): a resumed run ends bit for bit where an uninterrupted one does.
// --model-ema keeps torchvision's exponential moving average of the weights and buffers, updated
// every --model-ema-steps steps (a copy of the weights during the warmup), evaluated and
// checkpointed beside the model.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <ember/core/autocast_mode.h>
#include <ember/cuda/caching_allocator.h>
#include <ember/data/cifar.h>
#include <ember/data/idx.h>
#include <ember/data/image_folder.h>
#include <ember/data/transform_dataset.h>
#include <ember/data/transforms.h>
#include <ember/distributed/ddp.h>
#include <ember/distributed/distributed.h>
#include <ember/distributed/distributed_sampler.h>
#include <ember/distributed/sync_batch_norm.h>
#include <ember/ember.h>
#include <ember/examples/common/epoch_meter.h>
#include <ember/examples/common/graphed_step.h>
#include <ember/examples/common/launch.h>
#include <ember/examples/common/metrics_log.h>
#include <ember/examples/common/param_groups.h>
#include <ember/examples/common/run_setup.h>
#include <ember/examples/common/stop_request.h>
#include <ember/examples/models/resnet.h>
#include <ember/optim/swa_utils.h>
#include <ember/tools/common/arg_parser.h>

using namespace ember;
namespace fs = std::filesystem;
namespace T = ember::data::transforms;

namespace {

struct Args {
  std::string dataset = "fashion-mnist", data_dir, arch = "resnet18", device, precision, schedule = "cosine";
  std::string checkpoint, metrics, init_from;
  int64_t epochs = 15, batch_size = 256, workers = 4, seed = 0, warmup_epochs = 1, num_classes = 0;
  int64_t image_size = 0, limit_train = 0, limit_test = 0, debug_sigkill_at_step = -1,
          debug_sigterm_at_step = -1, model_ema_steps = 32;
  double lr = 0.1, momentum = 0.9, weight_decay = 5e-4, label_smoothing = 0.1, backbone_lr_scale = 1.0;
  double min_accuracy = 0, model_ema_decay = 0.99998;
  bool model_ema = false;
  bool no_nesterov = false, no_flip = false, channels_last = false, checkpointing = false, resume = false,
       cuda_graphs = false;
  bool sync_bn = false, freeze_backbone = false, synthetic = false, small_stem = false, imagenet_stem = false;
};

tools::ArgParser make_parser(Args& a) {
  tools::ArgParser p("train_resnet");
  p.option("--dataset", &a.dataset, "fashion-mnist, mnist, cifar10, cifar100 or imagefolder")
      .option("--data-dir", &a.data_dir, "the data set's folder (fashion-mnist: Debian's by default)")
      .option("--arch", &a.arch, "resnet18, resnet34 or resnet50")
      .option("--epochs", &a.epochs, "epochs to train")
      .option("--batch-size", &a.batch_size, "images per step per process")
      .option("--lr", &a.lr, "peak learning rate for 256 images a step, scaled linearly to the job's batch")
      .option("--momentum", &a.momentum, "SGD momentum")
      .flag("--no-nesterov", &a.no_nesterov, "plain momentum instead of Nesterov's")
      .option("--weight-decay", &a.weight_decay, "weight decay (not on biases and BatchNorm)")
      .option("--schedule", &a.schedule, "cosine (after a linear warmup) or onecycle")
      .option("--warmup-epochs", &a.warmup_epochs, "linear warmup before the cosine schedule")
      .option("--label-smoothing", &a.label_smoothing, "label smoothing of the cross-entropy")
      .option("--precision", &a.precision,
              "f32, bf16 (autocast) or f16 (autocast and GradScaler); "
              "default bf16 on a GPU, f32 on the CPU")
      .flag("--channels-last", &a.channels_last, "NHWC memory for the model and the images")
      .flag("--checkpointing", &a.checkpointing, "recompute each stage's activations in backward")
      .option("--seed", &a.seed, "seed of the weights, the data order and the augmentation")
      .option("--workers", &a.workers, "DataLoader worker threads")
      .flag("--no-flip", &a.no_flip, "no random horizontal flip (for digits)")
      .flag("--small-stem", &a.small_stem, "3x3 stride-1 stem, no max-pool (default for images up to 64 px)")
      .flag("--imagenet-stem", &a.imagenet_stem, "torchvision's 7x7 stride-2 stem and max-pool")
      .option("--image-size", &a.image_size, "imagefolder: the crop size (default 224)")
      .option("--device", &a.device, "cpu or cuda (default: cuda when there is a GPU)")
      .option("--checkpoint", &a.checkpoint, "checkpoint file, written each epoch")
      .flag("--resume", &a.resume, "continue from --checkpoint when it exists")
      .option("--metrics", &a.metrics,
              "metrics file, JSON lines (default: metrics.jsonl beside --checkpoint)")
      .option("--init-from", &a.init_from, "start from these weights (a torchvision-layout safetensors file)")
      .option("--num-classes", &a.num_classes, "classes of the new head (default: the data set's)")
      .flag("--freeze-backbone", &a.freeze_backbone, "train only the classifier")
      .option("--backbone-lr-scale", &a.backbone_lr_scale, "the backbone's lr relative to the head's")
      .flag("--sync-bn", &a.sync_bn, "synchronize BatchNorm statistics over the processes")
      .option("--limit-train", &a.limit_train, "use only the first N training images")
      .option("--limit-test", &a.limit_test, "use only the first N test images")
      .flag("--synthetic", &a.synthetic, "time the step on one random batch kept on the device (no data)")
      .flag("--cuda-graphs", &a.cuda_graphs,
            "capture the training step into a CUDA graph and replay it (one GPU)")
      .flag("--model-ema", &a.model_ema, "keep and evaluate an exponential moving average of the weights")
      .option("--model-ema-steps", &a.model_ema_steps, "steps between updates of the average")
      .option("--model-ema-decay", &a.model_ema_decay,
              "the average's decay, before torchvision's adjustment to the batch, steps and epochs")
      .option("--min-accuracy", &a.min_accuracy, "exit 1 unless the final test top-1 reaches it")
      .option("--debug-sigkill-at-step", &a.debug_sigkill_at_step,
              "fault injection: the process kills itself with SIGKILL before this step")
      .option("--debug-sigterm-at-step", &a.debug_sigterm_at_step,
              "fault injection: rank 0 sends itself SIGTERM before this step (a stop request)");
  return p;
}

// ---- Data ----

struct Data {
  std::shared_ptr<data::TransformDataset> train, test;
  int64_t num_classes = 0, channels = 0, image_size = 0;
};

// Per-channel mean and std of uint8 images [N, C, H, W], scaled to [0, 1].
std::pair<std::vector<double>, std::vector<double>> channel_stats(const Tensor& images) {
  Tensor x = images.to(kFloat64).div(255.0).transpose(0, 1).reshape({images.size(1), -1});
  Tensor mean = x.mean(1), std = x.std(1);
  std::vector<double> m, s;
  for (int64_t c = 0; c < images.size(1); ++c) {
    m.push_back(mean[c].item<double>());
    s.push_back(std[c].item<double>());
  }
  return {m, s};
}

std::shared_ptr<const data::Dataset> first_n(std::shared_ptr<const data::Dataset> set, int64_t n) {
  if (n <= 0 || n >= set->size()) return set;
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  return std::make_shared<data::Subset>(std::move(set), std::move(idx));
}

Data make_data(const Args& a) {
  std::shared_ptr<const data::Dataset> train, test;
  Tensor train_images;  // for the normalization statistics, when held in memory
  Data d;
  std::string dir = a.data_dir;
  if (a.dataset == "fashion-mnist" || a.dataset == "mnist") {
    if (dir.empty() && a.dataset == "fashion-mnist") dir = "/usr/share/datasets/fashion-mnist";
    EMBER_CHECK(!dir.empty(), "train_resnet: --dataset mnist needs --data-dir");
    auto tr = std::make_shared<data::MNIST>(dir, true);
    train_images = tr->images();
    d.num_classes = tr->num_classes();
    train = tr;
    test = std::make_shared<data::MNIST>(dir, false);
  } else if (a.dataset == "cifar10" || a.dataset == "cifar100") {
    EMBER_CHECK(!dir.empty(), "train_resnet: --dataset ", a.dataset, " needs --data-dir");
    if (a.dataset == "cifar10") {
      auto tr = std::make_shared<data::CIFAR10>(dir, true);
      train_images = tr->images();
      d.num_classes = tr->num_classes();
      train = tr;
      test = std::make_shared<data::CIFAR10>(dir, false);
    } else {
      auto tr = std::make_shared<data::CIFAR100>(dir, true);
      train_images = tr->images();
      d.num_classes = tr->num_classes();
      train = tr;
      test = std::make_shared<data::CIFAR100>(dir, false);
    }
  } else if (a.dataset == "imagefolder") {
    EMBER_CHECK(!dir.empty(), "train_resnet: --dataset imagefolder needs --data-dir");
    auto tr = std::make_shared<data::ImageFolder>((fs::path(dir) / "train").string());
    d.num_classes = static_cast<int64_t>(tr->classes().size());
    train = tr;
    test = std::make_shared<data::ImageFolder>((fs::path(dir) / "val").string());
  } else {
    throw Error("train_resnet: unknown --dataset " + a.dataset +
                " (fashion-mnist, mnist, cifar10, cifar100, imagefolder)");
  }
  train = first_n(train, a.limit_train);
  test = first_n(test, a.limit_test);

  std::vector<T::Transform> train_tf, test_tf;
  if (train_images.defined()) {
    // In memory, all of one size: pad-and-crop augmentation, statistics from the training set.
    d.channels = train_images.size(1);
    d.image_size = train_images.size(2);
    train_tf.push_back(T::RandomCrop(d.image_size, 4));
  } else {
    // Decoded files of any size: torchvision's resize-and-crop, ImageNet's statistics.
    d.channels = 3;
    d.image_size = a.image_size > 0 ? a.image_size : 224;
    const int64_t resize = d.image_size * 8 / 7;  // 256 for 224
    train_tf.push_back(T::Resize(resize));
    train_tf.push_back(T::RandomCrop(d.image_size, 0));
    test_tf.push_back(T::Resize(resize));
    test_tf.push_back(T::CenterCrop(d.image_size));
  }
  if (!a.no_flip) train_tf.push_back(T::RandomHorizontalFlip(0.5));
  auto [mean, std] = train_images.defined() ? channel_stats(train_images)
                                            : std::make_pair(std::vector<double>{0.485, 0.456, 0.406},
                                                             std::vector<double>{0.229, 0.224, 0.225});
  // Normalize converts uint8 to float32 in the same pass.
  for (auto* tf : {&train_tf, &test_tf}) tf->push_back(T::Normalize(mean, std));
  d.train =
      std::make_shared<data::TransformDataset>(train, T::Compose(train_tf), static_cast<uint64_t>(a.seed));
  d.test = std::make_shared<data::TransformDataset>(test, T::Compose(test_tf), static_cast<uint64_t>(a.seed));
  return d;
}

// ---- Model ----

models::ResNet make_model(const Args& a, const Data& d) {
  auto options = models::ResNetOptions()
                     .num_classes(d.num_classes)
                     .in_channels(d.channels)
                     .small_input_stem(a.small_stem || (!a.imagenet_stem && d.image_size <= 64));
  if (a.arch == "resnet18") return models::resnet18(options);
  if (a.arch == "resnet34") return models::resnet34(options);
  if (a.arch == "resnet50") return models::resnet50(options);
  throw Error("train_resnet: unknown --arch " + a.arch + " (resnet18, resnet34, resnet50)");
}

// Loads a torchvision-layout state_dict, or the model of a train_resnet checkpoint. A classifier
// of another size stays as initialized (a new head for --num-classes); any other missing,
// unexpected or mismatched tensor is an error.
void init_from(models::ResNet& model, const std::string& path, bool verbose) {
  StateDict saved = load(path);
  if (saved.metadata.count("ember.part.model")) saved = optim::Checkpoint::load(path).get("model");
  OrderedDict<Tensor> weights;
  std::vector<std::string> replaced;
  for (const auto& [key, mine] : model->state_dict()) {
    const Tensor* t = saved.tensors.find(key);
    if (t && key.rfind("fc.", 0) == 0 && !t->sizes().equals(mine.sizes())) {
      replaced.push_back(detail::str_cat(key, " ", t->sizes(), " -> ", mine.sizes()));
      weights.insert(key, mine);
    } else if (t) {
      weights.insert(key, *t);
    }
  }
  for (const auto& [key, t] : saved.tensors)
    if (!weights.contains(key)) weights.insert(key, t);  // for load_state_dict to name it
  model->load_state_dict(weights, /*strict=*/true);
  if (verbose) {
    std::printf("init-from %s: %zu tensors loaded\n", path.c_str(), weights.size() - replaced.size());
    for (const std::string& r : replaced) std::printf("  a new classifier: %s (not loaded)\n", r.c_str());
  }
}

// ---- Training ----

struct Totals {
  double loss = 0, top1 = 0, top5 = 0;
  int64_t count = 0;
};

// Sums of loss, top-1 and top-5 hits over the test set, on the device; summed over the
// processes when there are several (each evaluates its share).
Totals evaluate(nn::Module& model, const std::function<Tensor(const Tensor&)>& forward, const Data& d,
                const examples::Launch& l, const Args& a, const examples::Precision& precision) {
  NoGradGuard no_grad;
  model.eval();
  data::DataLoaderOptions opts = data::DataLoaderOptions()
                                     .batch_size(a.batch_size)
                                     .num_workers(a.workers)
                                     .pin_memory(l.device.is_cuda());
  std::shared_ptr<data::Sampler> sampler;
  if (l.distributed()) sampler = distributed::make_distributed_sampler(d.test->size(), /*shuffle=*/false);
  data::DataLoader loader =
      sampler ? data::DataLoader(d.test, opts, sampler) : data::DataLoader(d.test, opts);
  const int64_t k = std::min<int64_t>(5, d.num_classes);
  Tensor sums = zeros({4}, TensorOptions(kFloat64).device(l.device));  // loss, top1, topk, count
  for (auto& batch : loader) {
    Tensor x = batch[0].to(l.device, /*non_blocking=*/true), y = batch[1].to(l.device, /*non_blocking=*/true);
    if (a.channels_last) x = x.contiguous(MemoryFormat::ChannelsLast);
    Tensor logits;
    {
      amp::AutocastGuard autocast(l.device.type, precision.dtype, precision.autocast);
      logits = forward(x);
    }
    logits = logits.to(kFloat32);
    Tensor loss = cross_entropy(logits, y, {}, -100, "sum");
    Tensor top = std::get<1>(topk(logits, k, 1));
    Tensor hits = top.eq(y.unsqueeze(1));
    Tensor row = stack({loss.to(kFloat64), hits.narrow(1, 0, 1).sum().to(kFloat64), hits.sum().to(kFloat64),
                        full({}, static_cast<double>(y.size(0)), TensorOptions(kFloat64).device(l.device))});
    sums.add_(row);
  }
  if (l.distributed()) distributed::all_reduce(sums);
  Tensor s = sums.cpu();
  const double* p = s.data_ptr<double>();
  return {p[0], p[1], p[2], static_cast<int64_t>(p[3])};
}

std::unique_ptr<optim::LRScheduler> make_scheduler(const Args& a, optim::Optimizer& opt,
                                                   int64_t steps_per_epoch) {
  const int64_t total = a.epochs * steps_per_epoch;
  if (a.schedule == "onecycle") {
    std::vector<double> max_lr;
    for (const auto& g : opt.param_groups()) max_lr.push_back(g.options().get_lr());
    return std::make_unique<optim::OneCycleLR>(opt, max_lr, total);
  }
  EMBER_CHECK(a.schedule == "cosine", "train_resnet: unknown --schedule ", a.schedule, " (cosine, onecycle)");
  const int64_t warmup = std::min(total - 1, a.warmup_epochs * steps_per_epoch);
  if (warmup <= 0) return std::make_unique<optim::CosineAnnealingLR>(opt, total);
  auto warm = std::make_shared<optim::LinearLR>(opt, 0.01, 1.0, warmup);
  auto cosine = std::make_shared<optim::CosineAnnealingLR>(opt, total - warmup);
  return std::make_unique<optim::SequentialLR>(
      opt, std::vector<std::shared_ptr<optim::LRScheduler>>{warm, cosine}, std::vector<int64_t>{warmup});
}

}  // namespace

int main(int argc, char** argv) try {
  Args a;
  tools::ArgParser parser = make_parser(a);
  if (std::optional<int> code = parser.parse_or_exit_code(argc, argv)) return *code;
  if (a.resume && a.checkpoint.empty()) return parser.fail("--resume needs --checkpoint");
  const examples::Launch l = examples::init_launch(a.device);
  if (a.cuda_graphs && (!l.device.is_cuda() || l.distributed()))
    return parser.fail("--cuda-graphs needs one process on a CUDA device");
  const bool main_rank = l.is_main();
  const examples::Precision precision = examples::parse_precision("train_resnet", a.precision, l.device);
  a.metrics = examples::prepare_outputs(a.checkpoint, a.metrics, main_rank);

  manual_seed(static_cast<uint64_t>(a.seed));
  Data d = make_data(a);
  if (a.num_classes > 0) d.num_classes = a.num_classes;  // a new head of another size
  models::ResNet model = make_model(a, d);
  if (!a.init_from.empty()) init_from(model, a.init_from, main_rank);
  if (a.freeze_backbone) {
    for (const auto& [name, p] : model->named_parameters())
      if (name.rfind("fc.", 0) != 0) p.requires_grad_(false);
  }
  model->set_gradient_checkpointing(a.checkpointing);
  if (a.sync_bn && l.distributed()) nn::convert_sync_batchnorm(*model);
  model->to(l.device);
  if (a.channels_last) model->to(MemoryFormat::ChannelsLast);
  // The average's own copy of the architecture, built without moving the default generator, so
  // that training draws the same numbers with or without it.
  models::ResNet ema_net{nullptr};
  std::optional<optim::swa_utils::AveragedModel> ema;
  if (a.model_ema) {
    EMBER_CHECK(a.model_ema_steps > 0, "train_resnet: --model-ema-steps must be positive, got ",
                a.model_ema_steps);
    const Tensor rng = get_rng_state();
    ema_net = make_model(a, d);
    set_rng_state(rng);
    ema_net->to(l.device);
    if (a.channels_last) ema_net->to(MemoryFormat::ChannelsLast);
    // torchvision's adjustment: the decay per update, for this batch, update interval and length.
    const double adjust =
        static_cast<double>(l.world_size * a.batch_size * a.model_ema_steps) / static_cast<double>(a.epochs);
    const double alpha = std::min(1.0, (1.0 - a.model_ema_decay) * adjust);
    ema.emplace(ema_net, optim::swa_utils::get_ema_multi_avg_fn(1.0 - alpha), /*use_buffers=*/true);
  }
  std::optional<distributed::DistributedDataParallel<models::ResNetImpl>> ddp;
  if (l.distributed()) ddp.emplace(model);
  auto forward = [&](const Tensor& x) { return ddp ? (*ddp)(x) : model(x); };
  // Training mode, but a frozen backbone's BatchNorm keeps its running statistics.
  auto train_mode = [&] {
    model->train();
    if (!a.freeze_backbone) return;
    for (const auto& m : model->modules())
      if (dynamic_cast<nn::BatchNormImplBase*>(m.get())) m->eval();
  };

  data::DataLoaderOptions train_opts = data::DataLoaderOptions()
                                           .batch_size(a.batch_size)
                                           .num_workers(a.workers)
                                           .drop_last(true)  // no tiny last batch for BatchNorm
                                           .pin_memory(l.device.is_cuda())
                                           .seed(static_cast<uint64_t>(a.seed));
  std::optional<data::DataLoader> train_loader;
  if (l.distributed())
    train_loader.emplace(
        d.train, train_opts,
        distributed::make_distributed_sampler(d.train->size(), true, static_cast<uint64_t>(a.seed)));
  else
    train_loader.emplace(d.train, train_opts.shuffle(true));
  const int64_t steps_per_epoch = train_loader->size();
  EMBER_CHECK(steps_per_epoch > 0, "train_resnet: ", d.train->size(), " training images make no batch of ",
              a.batch_size, " per process");

  // Goyal et al.'s linear scaling: --lr is for 256 images a step. The head (fc) gets it, the
  // backbone --backbone-lr-scale of it.
  const double lr = a.lr * static_cast<double>(a.batch_size * l.world_size) / 256.0;
  const auto sgd = optim::SGDOptions(lr).momentum(a.momentum).nesterov(!a.no_nesterov);
  optim::SGD opt(
      examples::make_param_groups(
          *model, sgd,
          {.weight_decay = a.weight_decay, .head_prefix = "fc.", .backbone_lr_scale = a.backbone_lr_scale}),
      sgd);
  std::unique_ptr<optim::LRScheduler> sched = make_scheduler(a, opt, steps_per_epoch);
  amp::GradScaler scaler(65536.0, 2.0, 0.5, 2000, /*enabled=*/precision.grad_scaler);

  // The checkpoint holds the steps done: a stop on a signal leaves one mid-epoch.
  int64_t step = 0;
  const bool resuming = a.resume && fs::exists(a.checkpoint);
  if (resuming) {
    step = optim::load_checkpoint(a.checkpoint, *model, &opt, sched.get(), &scaler, ema ? &*ema : nullptr);
    if (main_rank) examples::report_resume(a.checkpoint, step, steps_per_epoch);
  }
  const int64_t start_epoch = step / steps_per_epoch;
  train_loader->set_epoch(start_epoch, step % steps_per_epoch);
  std::optional<examples::StopRequest> stop;  // with somewhere to save to
  if (!a.checkpoint.empty()) stop.emplace();
  examples::MetricsLog metrics(main_rank ? a.metrics : "", resuming);
  int64_t n_params = 0;
  for (const Tensor& p : model->parameters()) n_params += p.numel();
  if (main_rank)
    std::printf(
        "train_resnet: %s on %s (%lld train / %lld test images, %lld classes, %dx%lldx%lld), %lld "
        "parameters, "
        "%s, %s, batch %lld x %d processes, lr %.4g, %lld steps per epoch\n",
        a.arch.c_str(), a.dataset.c_str(), (long long)d.train->size(), (long long)d.test->size(),
        (long long)d.num_classes, (int)d.channels, (long long)d.image_size, (long long)d.image_size,
        (long long)n_params, l.device.str().c_str(), precision.name.c_str(), (long long)a.batch_size,
        l.world_size, lr, (long long)steps_per_epoch);

  Tensor synthetic_x, synthetic_y;
  if (a.synthetic) {
    synthetic_x = randn({a.batch_size, d.channels, d.image_size, d.image_size},
                        TensorOptions(kFloat32).device(l.device));
    synthetic_y = randint(0, d.num_classes, {a.batch_size}, TensorOptions(kInt64).device(l.device));
    if (a.channels_last) synthetic_x = synthetic_x.contiguous(MemoryFormat::ChannelsLast);
  }

  examples::GraphedStep graphed(
      [&](const std::vector<Tensor>& batch) {
        const Tensor x = a.channels_last ? batch[0].contiguous(MemoryFormat::ChannelsLast) : batch[0];
        Tensor loss;
        {
          amp::AutocastGuard autocast(l.device.type, precision.dtype, precision.autocast);
          loss = cross_entropy(forward(x), batch[1], {}, -100, "mean", a.label_smoothing);
        }
        opt.zero_grad();
        scaler.scale(loss).backward();
        scaler.step(opt);
        scaler.update();
        return loss;
      },
      a.cuda_graphs);
  Totals last_eval;
  for (int64_t epoch = start_epoch; epoch < a.epochs; ++epoch) {
    train_mode();
    examples::EpochMeter meter(epoch, a.epochs, (epoch + 1) * steps_per_epoch - step, a.batch_size, "img", l);
    // Whether to go on: false once a stop was requested (then `step` steps are done).
    auto train_step = [&](const Tensor& x, const Tensor& y) {
      if (step == a.debug_sigkill_at_step) std::raise(SIGKILL);
      if (step == a.debug_sigterm_at_step && l.is_main()) std::raise(SIGTERM);
      meter.add(graphed({x, y}));
      sched->step();  // outside the graph: it writes the rate the fused step reads on the device
      ++step;
      if (ema && step % a.model_ema_steps == 0) {
        // Until warm a copy of the weights, as torchvision's reset to n_averaged 0 gives, but
        // without writing the count, which the next update would read back from the GPU.
        if (epoch < a.warmup_epochs)
          ema_net->load_state_dict(model->state_dict());
        else
          ema->update_parameters(*model);
      }
      return !(stop && stop->should_stop(step, l));
    };
    bool go_on = true;
    if (a.synthetic) {
      while (go_on && step < (epoch + 1) * steps_per_epoch) go_on = train_step(synthetic_x, synthetic_y);
    } else {
      // The loader is at the epoch's next batch (set_epoch on resuming, else where the last epoch left it).
      for (auto& batch : *train_loader)
        if (!(go_on = train_step(batch[0].to(l.device, /*non_blocking=*/true),
                                 batch[1].to(l.device, /*non_blocking=*/true))))
          break;
    }
    if (!go_on) {
      if (main_rank) {
        optim::save_checkpoint(a.checkpoint, *model, &opt, sched.get(), step, &scaler, ema ? &*ema : nullptr);
        examples::report_stop(a.checkpoint, step);
      }
      if (l.distributed()) distributed::destroy_process_group();
      return 0;
    }
    const auto [train_loss, epoch_s, done] = meter.finish();
    const double peak_gib =
        l.device.is_cuda() ? cuda::max_memory_allocated(l.device.index) / 1073741824.0 : 0;
    last_eval = evaluate(*model, forward, d, l, a, precision);
    const double n = static_cast<double>(std::max<int64_t>(last_eval.count, 1));
    std::optional<double> ema_top1;
    if (ema) {
      const Totals t = evaluate(
          *ema_net, [&](const Tensor& x) { return ema_net(x); }, d, l, a, precision);
      ema_top1 = t.top1 / static_cast<double>(std::max<int64_t>(t.count, 1));
    }
    if (main_rank) {
      char ema_text[32] = "";
      if (ema_top1) std::snprintf(ema_text, sizeof ema_text, " (EMA top-1 %.4f)", *ema_top1);
      std::printf(
          "epoch %lld/%lld: train loss %.4f | test loss %.4f top-1 %.4f top-5 %.4f%s | %.1f s, %.0f img/s, "
          "lr %.4g%s\n",
          (long long)epoch + 1, (long long)a.epochs, train_loss, last_eval.loss / n, last_eval.top1 / n,
          last_eval.top5 / n, ema_text, epoch_s, done * a.batch_size * l.world_size / epoch_s,
          opt.param_groups().back().options().get_lr(),
          l.device.is_cuda() ? detail::str_cat(", peak ", peak_gib, " GiB").c_str() : "");
      examples::MetricRecord record{{"epoch", epoch + 1},
                                    {"step", step},
                                    {"train_loss", train_loss},
                                    {"test_loss", last_eval.loss / n},
                                    {"test_top1", last_eval.top1 / n},
                                    {"test_top5", last_eval.top5 / n},
                                    {"epoch_s", epoch_s},
                                    {"img_per_s", done * a.batch_size * l.world_size / epoch_s},
                                    {"lr", opt.param_groups().back().options().get_lr()},
                                    {"peak_gib", peak_gib}};
      if (ema_top1) record.emplace_back("ema_top1", *ema_top1);
      metrics.write(record);
      if (!a.checkpoint.empty())
        optim::save_checkpoint(a.checkpoint, *model, &opt, sched.get(), step, &scaler, ema ? &*ema : nullptr);
    }
  }
  const double top1 = last_eval.count ? last_eval.top1 / static_cast<double>(last_eval.count) : 0;
  if (l.distributed()) distributed::destroy_process_group();
  if (main_rank && top1 < a.min_accuracy) {
    std::printf("train_resnet: test top-1 %.4f is below --min-accuracy %.4f\n", top1, a.min_accuracy);
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
