// Trains a small CNN on the 8x8 handwritten digits (UCI, as scikit-learn ships them) and reports
// test accuracy: the README's main job. On the GPU when there is one, else on the CPU.
//   train_digits --data digits.csv [--epochs 20] [--batch-size 64] [--lr 3e-3] [--device cpu|cuda]
//                [--checkpoint ckpt.safetensors] [--resume] [--min-accuracy 0.95]
// scripts/run_main.sh fetches the data and runs it.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <ember/ember.h>

using namespace ember;

namespace {

struct Args {
  std::string data, checkpoint, device;
  int64_t epochs = 20, batch_size = 64;
  double lr = 3e-3, min_accuracy = 0.95;
  bool resume = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw Error("train_digits: " + k + " needs a value");
      return argv[++i];
    };
    if (k == "--data") a.data = next();
    else if (k == "--epochs") a.epochs = std::stoll(next());
    else if (k == "--batch-size") a.batch_size = std::stoll(next());
    else if (k == "--lr") a.lr = std::stod(next());
    else if (k == "--device") a.device = next();
    else if (k == "--checkpoint") a.checkpoint = next();
    else if (k == "--resume") a.resume = true;
    else if (k == "--min-accuracy") a.min_accuracy = std::stod(next());
    else throw Error("train_digits: unknown argument " + k);
  }
  if (a.data.empty()) throw Error("train_digits: --data digits.csv is required (scripts/fetch_digits.sh)");
  return a;
}

// digits.csv: one image per line, 64 pixel values in 0..16 then the label.
std::pair<Tensor, Tensor> load_digits(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("train_digits: cannot open " + path);
  std::vector<float> pixels;
  std::vector<int64_t> labels;
  std::string line;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string cell;
    std::vector<float> row;
    while (std::getline(ss, cell, ',')) row.push_back(std::stof(cell));
    if (row.size() != 65) throw Error("train_digits: " + path + ": expected 65 values per line");
    pixels.insert(pixels.end(), row.begin(), row.begin() + 64);
    labels.push_back(static_cast<int64_t>(row[64]));
  }
  const int64_t n = static_cast<int64_t>(labels.size());
  Tensor x = from_blob(pixels.data(), {n, 1, 8, 8}, kFloat32).clone() / 16.0;
  Tensor y = from_blob(labels.data(), {n}, kInt64).clone();
  return {x, y};
}

// conv(1->32) -> conv(32->64) -> pool -> fc(1024->128) -> fc(128->10).
class NetImpl : public nn::Module {
 public:
  NetImpl() : Module("Net") {
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)));
    bn1 = register_module("bn1", nn::BatchNorm2d(32));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)));
    bn2 = register_module("bn2", nn::BatchNorm2d(64));
    fc1 = register_module("fc1", nn::Linear(64 * 4 * 4, 128));
    drop = register_module("drop", nn::Dropout(0.25));
    fc2 = register_module("fc2", nn::Linear(128, 10));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = bn1(conv1(x)).relu();
    h = max_pool2d(bn2(conv2(h)).relu(), 2);
    return fc2(drop(fc1(h.flatten(1)).relu()));
  }

  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  nn::Linear fc1{nullptr}, fc2{nullptr};
  nn::Dropout drop{nullptr};
};
EMBER_MODULE(Net);

double accuracy(Net& net, const data::Subset& set, Device dev) {
  NoGradGuard no_grad;
  net->eval();
  data::DataLoader loader(set, data::DataLoaderOptions().batch_size(512));
  int64_t correct = 0;
  for (auto& batch : loader) {
    Tensor pred = net(batch[0].to(dev)).argmax(1);
    correct += pred.eq(batch[1].to(dev)).sum().item<int64_t>();
  }
  net->train();
  return static_cast<double>(correct) / static_cast<double>(set.size());
}

void progress(int64_t epoch, int64_t epochs, int64_t done, int64_t total, double loss, double per_s) {
  char bar[25] = {};
  for (int i = 0; i < 24; ++i) bar[i] = i < 24 * done / total ? '#' : '.';
  std::printf("\repoch %3lld/%lld [%s] loss %.4f  %7.0f img/s", (long long)epoch, (long long)epochs, bar, loss,
              per_s);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  const Device dev(args.device.empty() ? (cuda::is_available() ? "cuda" : "cpu") : args.device);
  manual_seed(0);
  auto [x, y] = load_digits(args.data);
  auto full = std::make_shared<data::TensorDataset>(x, y);
  // 80% train, 20% test, the same split every run.
  const int64_t n_test = full->size() / 5;
  std::vector<data::Subset> split = data::random_split(full, {full->size() - n_test, n_test}, 42);
  data::DataLoader train(split[0], data::DataLoaderOptions().batch_size(args.batch_size).shuffle(true).seed(1)
                                       .num_workers(1));

  Net net;
  net->to(dev);
  optim::AdamW opt(net->parameters(), optim::AdamWOptions(args.lr).weight_decay(1e-4));
  optim::CosineAnnealingLR sched(opt, args.epochs * train.size());
  int64_t start_epoch = 0;
  if (args.resume && !args.checkpoint.empty()) {
    start_epoch = optim::load_checkpoint(args.checkpoint, *net, &opt, &sched);
    std::printf("resumed from %s at epoch %lld\n", args.checkpoint.c_str(), (long long)start_epoch);
  }
  int64_t n_params = 0;
  for (const Tensor& p : net->parameters()) n_params += p.numel();
  std::printf("train_digits: %lld train / %lld test images, %lld parameters, device %s\n",
              (long long)split[0].size(), (long long)split[1].size(), (long long)n_params, dev.str().c_str());

  const auto t0 = std::chrono::steady_clock::now();
  int64_t images = 0;
  double acc = 0;
  for (int64_t epoch = start_epoch; epoch < args.epochs; ++epoch) {
    train.set_epoch(epoch);
    const auto e0 = std::chrono::steady_clock::now();
    int64_t done = 0, seen = 0;
    Tensor loss_sum = zeros({}, TensorOptions(kFloat32).device(dev));
    for (auto& batch : train) {
      Tensor xb = batch[0].to(dev), yb = batch[1].to(dev);
      opt.zero_grad();
      Tensor loss = cross_entropy(net(xb), yb);
      loss.backward();
      opt.step();
      sched.step();
      {
        NoGradGuard no_grad;
        loss_sum.add_(loss.detach() * static_cast<double>(yb.size(0)));
      }
      seen += yb.size(0);
      if (++done % 4 == 0 || done == train.size()) {
        // The running loss is read back only every few batches: each read waits for the GPU.
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
        progress(epoch + 1, args.epochs, done, train.size(), loss_sum.item<float>() / seen, seen / secs);
      }
    }
    images += seen;
    acc = accuracy(net, split[1], dev);
    std::printf("  test accuracy %.4f\n", acc);
    if (!args.checkpoint.empty()) optim::save_checkpoint(args.checkpoint, *net, &opt, &sched, epoch + 1);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("done: test accuracy %.4f after %lld epochs, %.1f s, %.0f img/s, device %s\n", acc,
              (long long)args.epochs, secs, images / secs, dev.str().c_str());
  if (acc < args.min_accuracy) {
    std::printf("train_digits: test accuracy %.4f is below %.2f\n", acc, args.min_accuracy);
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
