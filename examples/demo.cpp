// The main job for now: a two-layer MLP learns a 3-class spiral with hand-written gradients
// (autograd comes next). Run: build/examples/demo [steps]. Prints the loss and accuracy as
// training goes; exits non-zero if the loss did not fall.
#include <ember/ember.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

using ember::Tensor;

namespace {

// Three interleaved spiral arms (cs231n's toy set): 2-D points, labels 0..2.
std::pair<Tensor, Tensor> make_spiral(int64_t per_class, int64_t classes) {
  Tensor r = ember::linspace(0.0, 1.0, per_class).repeat({classes});
  Tensor label = ember::arange(classes).view({classes, 1}).expand({classes, per_class}).flatten();
  Tensor theta = label.to(ember::kFloat32) * 4 + r * 4 + ember::randn({classes * per_class}) * 0.2;
  Tensor x = ember::stack({r * ember::sin(theta), r * ember::cos(theta)}, 1);
  return {x, label};
}

}  // namespace

int main(int argc, char** argv) {
  int steps = argc > 1 ? std::atoi(argv[1]) : 2000;
  ember::manual_seed(0);
  const int64_t classes = 3, hidden = 64;
  auto [x, y] = make_spiral(200, classes);
  const auto n = static_cast<double>(x.size(0));
  Tensor w1 = ember::randn({2, hidden}) * std::sqrt(2.0 / 2), b1 = ember::zeros({hidden});
  Tensor w2 = ember::randn({hidden, classes}) * std::sqrt(2.0 / hidden), b2 = ember::zeros({classes});
  Tensor target = ember::one_hot(y, classes).to(ember::kFloat32);
  const double lr = 1.0;
  double first_loss = 0, loss = 0;
  for (int step = 0; step <= steps; ++step) {
    Tensor h = ember::relu(x.matmul(w1) + b1);
    Tensor logits = h.matmul(w2) + b2;
    loss = ember::cross_entropy(logits, y).item<double>();
    if (step == 0) first_loss = loss;
    if (step % (steps / 10 > 0 ? steps / 10 : 1) == 0) {
      double acc = logits.argmax(1).eq(y).to(ember::kFloat32).mean().item<double>();
      std::printf("step %5d  loss %.4f  accuracy %.3f\n", step, loss, acc);
    }
    // Backward by hand: d loss / d logits = (softmax - one_hot) / n.
    Tensor dlogits = (logits.softmax(1) - target) / n;
    Tensor dh = dlogits.matmul(w2.t()) * (h > 0);
    w2.sub_(h.t().matmul(dlogits), lr);
    b2.sub_(dlogits.sum({0}), lr);
    w1.sub_(x.t().matmul(dh), lr);
    b1.sub_(dh.sum({0}), lr);
  }
  std::printf("loss %.4f -> %.4f\n", first_loss, loss);
  return loss < 0.5 * first_loss ? 0 : 1;
}
