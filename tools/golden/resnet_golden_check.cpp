// ember's ResNet-18 against torchvision's on the same weights and batch (the file that
// tools/golden/torch_resnet_golden.py writes): eval-mode logits, then one training step's loss and
// every parameter gradient, in float32 and under bf16 autocast, on the GPU. Prints a line per
// check and exits 1 when one fails:
//
//   PASS eval_logits f32 rel=3.1e-07 tol=1e-04
//
// The error of a tensor is ||ember - torch|| / ||torch||; a gradient check reports the worst one.
#include <cmath>
#include <cstdio>
#include <string>

#include <ember/core/autocast_mode.h>
#include <ember/ember.h>
#include <ember/examples/models/resnet.h>

using namespace ember;

namespace {

double rel_error(const Tensor& got, const Tensor& want) {
  Tensor g = got.to(Device(kCPU)).to(kFloat64), w = want.to(kFloat64);
  return (g - w).norm().item<double>() / std::max(w.norm().item<double>(), 1e-30);
}

bool report(const std::string& name, double rel, double tol, const std::string& worst = "") {
  const bool ok = std::isfinite(rel) && rel <= tol;
  std::printf("%s %s rel=%.2e tol=%.0e%s%s\n", ok ? "PASS" : "FAIL", name.c_str(), rel, tol,
              worst.empty() ? "" : " worst=", worst.c_str());
  return ok;
}

models::ResNet load_model(const StateDict& golden, Device dev) {
  models::ResNet m = models::resnet18(models::ResNetOptions().num_classes(10));
  OrderedDict<Tensor> weights;
  for (const auto& [key, t] : golden.tensors)
    if (key.rfind("model.", 0) == 0) weights.insert(key.substr(6), t);
  m->load_state_dict(weights, /*strict=*/true);
  m->to(dev);
  return m;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::fprintf(stderr, "usage: resnet_golden_check GOLDEN.safetensors\n");
    return 2;
  }
  EMBER_CHECK(cuda::is_available(), "resnet_golden_check: needs a GPU");
  const Device dev(kCUDA);
  StateDict golden = load(argv[1]);
  const auto& g = golden.tensors;
  Tensor x = g.at("x").to(dev), y = g.at("y").to(dev);
  bool ok = true;
  {
    models::ResNet m = load_model(golden, dev);
    m->eval();
    NoGradGuard no_grad;
    ok &= report("eval_logits f32", rel_error(m(x), g.at("eval_logits")), 1e-4);
  }
  for (const std::string prec : {"f32", "bf16"}) {
    const double tol = prec == "f32" ? 1e-4 : 1e-2;
    models::ResNet m = load_model(golden, dev);
    m->train();
    Tensor loss;
    {
      amp::AutocastGuard autocast(kCUDA, kBFloat16, prec == "bf16");
      loss = cross_entropy(m(x), y);
    }
    loss.backward();
    ok &= report("loss " + prec, rel_error(loss.reshape({1}).to(kFloat32), g.at(prec + ".loss")), tol);
    double worst = 0;
    std::string worst_name;
    int64_t n = 0;
    for (const auto& [name, p] : m->named_parameters()) {
      const double e = rel_error(p.grad(), g.at(prec + ".grad." + name));
      if (!(e <= worst)) {
        worst = e;
        worst_name = name;
      }
      ++n;
    }
    ok &= report("grads " + prec + " (" + std::to_string(n) + " parameters)", worst, tol, worst_name);
  }
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
