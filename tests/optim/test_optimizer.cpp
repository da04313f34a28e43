// The Optimizer base: parameter groups and their options, zero_grad, step(closure), lazily
// created per-parameter state, and state_dict / load_state_dict (an exact resume, and every
// mismatch it refuses).
#include <cmath>

#include "test_util.h"

namespace ember::testing {
namespace {

using optim::OptimizerParamGroup;

Tensor param(IntArrayRef shape, double value, ScalarType dt = kFloat32) {
  return full(shape, value, dt).requires_grad_();
}

// Gradients that change with the step, so the state matters.
void set_grads(const std::vector<Tensor>& ps, int step) {
  for (size_t j = 0; j < ps.size(); ++j) {
    std::vector<double> g;
    for (int64_t i = 0; i < ps[j].numel(); ++i)
      g.push_back(std::cos(1.1 * static_cast<double>(i) + 0.9 * j + 0.6 * step));
    ps[j].set_grad(tensor(g, kFloat64).to(ps[j].dtype()).reshape(ps[j].sizes()));
  }
}

std::vector<Tensor> fresh_params(ScalarType dt) {
  return {param({2, 3}, 0.5, dt), param({4}, -0.25, dt), param({}, 1.5, dt)};
}

TEST(Optimizer, GroupsTakeTheDefaultsOrTheirOwnOptions) {
  Tensor a = param({2}, 1), b = param({2}, 1), c = param({2}, 1);
  optim::SGD opt(
      {OptimizerParamGroup({a}), OptimizerParamGroup({b}, std::make_unique<optim::SGDOptions>(0.5))},
      optim::SGDOptions(0.25));
  ASSERT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(opt.param_groups()[0].options().get_lr(), 0.25);
  EXPECT_EQ(opt.param_groups()[1].options().get_lr(), 0.5);
  opt.add_param_group(OptimizerParamGroup({c}));
  EXPECT_EQ(opt.param_groups()[2].options().get_lr(), 0.25);
  // Each group owns a copy: changing one changes neither the defaults nor the others.
  static_cast<optim::SGDOptions&>(opt.param_groups()[2].options()).lr(0.125);
  EXPECT_EQ(opt.param_groups()[0].options().get_lr(), 0.25);
  EXPECT_EQ(opt.defaults().get_lr(), 0.25);
  EXPECT_EQ(opt.size(), 3u);
  std::vector<Tensor> all = opt.parameters();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_TRUE(all[0].is_same(a) && all[1].is_same(b) && all[2].is_same(c));

  for (const Tensor& p : all) p.set_grad(ones({2}));
  opt.step();  // p - lr * 1, exact in float32 for these lrs
  EXPECT_CLOSE(a, full({2}, 0.75), Tolerance{0, 0});
  EXPECT_CLOSE(b, full({2}, 0.5), Tolerance{0, 0});
  EXPECT_CLOSE(c, full({2}, 0.875), Tolerance{0, 0});
  EXPECT_TRUE(a.is_leaf() && a.requires_grad());
}

TEST(Optimizer, RefusesBadGroupsAndOptions) {
  Tensor a = param({2, 3}, 1), b = param({3}, 1);
  optim::SGD opt(std::vector<Tensor>{a});
  EXPECT_EMBER_ERROR(opt.add_param_group(OptimizerParamGroup({b, a})), "SGD", "more than once",
                     "parameter 1 of group 1", "[2, 3]");
  EXPECT_EMBER_ERROR(opt.add_param_group(OptimizerParamGroup({b, b})), "SGD", "more than once");
  EXPECT_EMBER_ERROR(opt.add_param_group(OptimizerParamGroup({b * 2})),
                     "SGD: can't optimize a non-leaf tensor", "parameter 0 of group 1", "[3]");
  EXPECT_EMBER_ERROR(opt.add_param_group(OptimizerParamGroup({Tensor()})),
                     "SGD: parameter 0 of group 1 is undefined");
  EXPECT_EMBER_ERROR(opt.add_param_group(OptimizerParamGroup({b}, std::make_unique<optim::AdamOptions>())),
                     "SGD: parameter group 1 has Adam options");
  EXPECT_EMBER_ERROR(opt.add_param_group(OptimizerParamGroup({b}, std::make_unique<optim::SGDOptions>(-1))),
                     "SGD: invalid learning rate: -1");
  EXPECT_EQ(opt.param_groups().size(), 1u);  // nothing was added
  EXPECT_EMBER_ERROR(optim::SGD(std::vector<OptimizerParamGroup>{}), "SGD: got an empty parameter list");
  EXPECT_EMBER_ERROR(optim::SGD(std::vector<Tensor>{}), "SGD: got an empty parameter list");
  EXPECT_EMBER_ERROR(optim::AdamW(std::vector<Tensor>{}), "AdamW: got an empty parameter list");
  EXPECT_EMBER_ERROR(optim::Adam({zeros({2}, kInt64)}, optim::AdamOptions().fused(true)),
                     "Adam: fused=true requires floating point parameters", "int64");

  std::vector<Tensor> ps = {param({2}, 1)};
  EXPECT_EMBER_ERROR(optim::Adam(ps, optim::AdamOptions(-0.5)), "Adam: invalid learning rate: -0.5");
  EXPECT_EMBER_ERROR(optim::Adam(ps, optim::AdamOptions().betas({1.0, 0.999})),
                     "Adam: invalid beta parameter at index 0: 1");
  EXPECT_EMBER_ERROR(optim::AdamW(ps, optim::AdamWOptions().betas({0.9, -0.1})),
                     "AdamW: invalid beta parameter at index 1: -0.1");
  EXPECT_EMBER_ERROR(optim::Adam(ps, optim::AdamOptions().eps(-1e-8)), "Adam: invalid epsilon value");
  EXPECT_EMBER_ERROR(optim::Adam(ps, optim::AdamOptions().weight_decay(-1)),
                     "Adam: invalid weight_decay value: -1");
  EXPECT_EMBER_ERROR(optim::SGD(ps, optim::SGDOptions(0.1).momentum(-0.9)),
                     "SGD: invalid momentum value: -0.9");
  EXPECT_EMBER_ERROR(optim::SGD(ps, optim::SGDOptions(0.1).weight_decay(-1)),
                     "SGD: invalid weight_decay value");
  EXPECT_EMBER_ERROR(optim::SGD(ps, optim::SGDOptions(0.1).nesterov(true)), "SGD: Nesterov momentum requires",
                     "momentum 0");
  EXPECT_EMBER_ERROR(optim::SGD(ps, optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true)),
                     "Nesterov momentum requires", "dampening 0.1");
}

TEST(Optimizer, ZeroGrad) {
  Tensor a = param({3}, 1), b = param({2}, 1);
  optim::SGD opt(std::vector<Tensor>{a, b});
  a.set_grad(ones({3}));
  Tensor grad = a.grad();
  opt.zero_grad(/*set_to_none=*/false);
  EXPECT_TRUE(a.grad().is_same(grad));  // zeroed in place
  EXPECT_CLOSE(a.grad(), zeros({3}), Tolerance{0, 0});
  EXPECT_FALSE(b.grad().defined());
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(Optimizer, StateIsCreatedAtAParametersFirstUpdate) {
  Tensor a = param({2, 3}, 1), b = param({4}, 1);
  optim::Adam opt(std::vector<Tensor>{a, b}, optim::AdamOptions(0.1).amsgrad(true));
  a.set_grad(ones({2, 3}));
  opt.step();
  EXPECT_CLOSE(b, ones({4}), Tolerance{0, 0});  // no gradient: untouched
  ASSERT_EQ(opt.state().size(), 1u);
  const optim::OptimizerParamState& s = opt.state().at(a.unsafe_impl());
  EXPECT_EQ(s.buffers.keys(), (std::vector<std::string>{"exp_avg", "exp_avg_sq", "max_exp_avg_sq"}));
  EXPECT_EQ(s.step.dtype(), kFloat32);
  EXPECT_EQ(s.step.dim(), 0);
  EXPECT_EQ(s.step.item<double>(), 1);
  // First Adam step: exp_avg = 0.1 g, exp_avg_sq = 0.001 g^2, param -= lr (g = 1).
  EXPECT_CLOSE(s.buffers.at("exp_avg"), full({2, 3}, 0.1));
  EXPECT_CLOSE(s.buffers.at("exp_avg_sq"), full({2, 3}, 0.001));
  EXPECT_CLOSE(a, full({2, 3}, 0.9));
}

TEST(Optimizer, StepWithClosure) {
  Tensor w = param({3}, 2);
  optim::SGD opt(std::vector<Tensor>{w}, optim::SGDOptions(0.25));
  bool grad_mode_in_closure = false;
  Tensor loss = opt.step([&] {
    grad_mode_in_closure = GradMode::is_enabled();
    opt.zero_grad();
    Tensor l = (w * w).sum();
    l.backward();
    return l;
  });
  EXPECT_TRUE(grad_mode_in_closure);
  EXPECT_EQ(loss.item<double>(), 12);                // 3 * 2^2, before the step
  EXPECT_CLOSE(w, full({3}, 1.0), Tolerance{0, 0});  // 2 - 0.25 * 4
  EXPECT_FALSE(opt.step().defined());
}

TEST(Optimizer, GradScalingNeedsTheFusedStep) {
  Tensor w = param({3}, 1);
  optim::Adam opt(std::vector<Tensor>{w}, optim::AdamOptions().fused(false));
  w.set_grad(ones({3}));
  opt.set_grad_scaling(full({}, 2.0), zeros({}));
  EXPECT_EMBER_ERROR(opt.step(), "Adam: grad_scale/found_inf are set", "fused(true)");
  opt.set_grad_scaling(Tensor(), Tensor());
  opt.step();
}

// --- state_dict / load_state_dict ---

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

struct ResumeCase {
  const char* name;
  MakeOptimizer make;
};

std::vector<ResumeCase> resume_cases() {
  auto groups = [](const std::vector<Tensor>& ps, auto options_a, auto options_b) {
    using A = decltype(options_a);
    return std::vector<OptimizerParamGroup>{
        OptimizerParamGroup({ps[0], ps[1]}, std::make_unique<A>(options_a)),
        OptimizerParamGroup({ps[2]}, std::make_unique<decltype(options_b)>(options_b))};
  };
  std::vector<ResumeCase> cases;
  for (bool fused : {false, true}) {
    cases.push_back({"sgd nesterov", [=](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
                       return std::make_unique<optim::SGD>(
                           groups(ps, optim::SGDOptions(0.1).momentum(0.9).nesterov(true).fused(fused),
                                  optim::SGDOptions(0.05).momentum(0.5).weight_decay(0.1).fused(fused)));
                     }});
    cases.push_back({"adam amsgrad", [=](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
                       return std::make_unique<optim::Adam>(
                           groups(ps, optim::AdamOptions(0.1).amsgrad(true).fused(fused),
                                  optim::AdamOptions(0.01).betas({0.5, 0.9}).weight_decay(0.1).fused(fused)));
                     }});
    cases.push_back({"adamw", [=](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
                       return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions(0.1).fused(fused));
                     }});
  }
  cases.push_back({"adagrad", [=](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
                     return std::make_unique<optim::Adagrad>(
                         groups(ps, optim::AdagradOptions(0.1).lr_decay(0.1).initial_accumulator_value(0.5),
                                optim::AdagradOptions(0.01).weight_decay(0.1)));
                   }});
  cases.push_back(
      {"rmsprop centered momentum", [=](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::RMSprop>(
             groups(ps, optim::RMSpropOptions(0.1).momentum(0.9).centered(true),
                    optim::RMSpropOptions(0.01).alpha(0.9).weight_decay(0.1)));
       }});
  return cases;
}

// Trains `from`..`to` steps.
void train(optim::Optimizer& opt, const std::vector<Tensor>& ps, int from, int to) {
  for (int s = from; s <= to; ++s) {
    set_grads(ps, s);
    opt.step();
  }
}

TEST(OptimizerStateDict, ResumeIsBitExact) {
  for (ScalarType dt : {kFloat32, kFloat64}) {
    for (const ResumeCase& c : resume_cases()) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(to_string(dt)));
      std::vector<Tensor> straight = fresh_params(dt);
      std::unique_ptr<optim::Optimizer> opt = c.make(straight);
      train(*opt, straight, 1, 5);

      std::vector<Tensor> first = fresh_params(dt);
      std::unique_ptr<optim::Optimizer> before = c.make(first);
      train(*before, first, 1, 2);
      StateDict sd = before->state_dict();
      // A fresh optimizer with other lrs: loading restores the saved options too.
      std::vector<Tensor> resumed;
      for (const Tensor& p : first) resumed.push_back(p.detach().clone().requires_grad_());
      std::unique_ptr<optim::Optimizer> after = c.make(resumed);
      for (optim::OptimizerParamGroup& g : after->param_groups()) g.options().set_lr(123);
      after->load_state_dict(sd);
      train(*after, resumed, 3, 5);
      for (size_t i = 0; i < straight.size(); ++i) EXPECT_CLOSE(resumed[i], straight[i], Tolerance{0, 0});
    }
  }
}

TEST(OptimizerStateDict, Layout) {
  std::vector<Tensor> ps = fresh_params(kFloat32);
  optim::Adam opt({OptimizerParamGroup({ps[0], ps[1]}),
                   OptimizerParamGroup({ps[2]}, std::make_unique<optim::AdamOptions>(
                                                    optim::AdamOptions(0.1).amsgrad(true)))});
  set_grads({ps[0], ps[2]}, 1);
  ps[1].set_grad(Tensor());
  opt.step();
  opt.step();
  StateDict sd = opt.state_dict();
  const std::map<std::string, std::string> want = {
      {"optimizer", "Adam"},
      {"param_groups", "2"},
      {"param_groups.0.params", "0,1"},
      {"param_groups.0.lr", "0.001"},
      {"param_groups.0.betas", "0.90000000000000002,0.999"},
      {"param_groups.0.eps", "1e-08"},
      {"param_groups.0.weight_decay", "0"},
      {"param_groups.0.amsgrad", "false"},
      {"param_groups.0.maximize", "false"},
      {"param_groups.0.fused", ""},
      {"param_groups.1.params", "2"},
      {"param_groups.1.lr", "0.10000000000000001"},
      {"param_groups.1.betas", "0.90000000000000002,0.999"},
      {"param_groups.1.eps", "1e-08"},
      {"param_groups.1.weight_decay", "0"},
      {"param_groups.1.amsgrad", "true"},
      {"param_groups.1.maximize", "false"},
      {"param_groups.1.fused", ""},
      {"state.0.step", "2"},
      {"state.2.step", "2"},
  };
  EXPECT_EQ(sd.metadata, want);
  EXPECT_EQ(sd.tensors.keys(),
            (std::vector<std::string>{"state.0.exp_avg", "state.0.exp_avg_sq", "state.2.exp_avg",
                                      "state.2.exp_avg_sq", "state.2.max_exp_avg_sq"}));
  // A snapshot: later steps leave it alone.
  Tensor saved = sd.tensors.at("state.0.exp_avg").clone();
  opt.step();
  EXPECT_CLOSE(sd.tensors.at("state.0.exp_avg"), saved, Tolerance{0, 0});
  EXPECT_FALSE(
      sd.tensors.at("state.0.exp_avg").is_same(opt.state().at(ps[0].unsafe_impl()).buffers.at("exp_avg")));
}

TEST(OptimizerStateDict, LoadRefusesWhatDoesNotMatch) {
  std::vector<Tensor> ps = fresh_params(kFloat32);
  auto make = [&] {
    return std::make_unique<optim::Adam>(
        std::vector<OptimizerParamGroup>{OptimizerParamGroup({ps[0], ps[1]}), OptimizerParamGroup({ps[2]})},
        optim::AdamOptions(0.1));
  };
  std::unique_ptr<optim::Adam> opt = make();
  set_grads(ps, 1);
  opt->step();
  const StateDict good = opt->state_dict();
  std::unique_ptr<optim::Adam> target = make();
  auto edited = [&](const std::function<void(StateDict&)>& edit) {
    StateDict sd = good;
    edit(sd);
    return sd;
  };

  optim::SGD sgd(ps);
  EXPECT_EMBER_ERROR(sgd.load_state_dict(good), "SGD.load_state_dict: the state dict is from Adam, not SGD");
  optim::Adam one_group(ps);
  EXPECT_EMBER_ERROR(one_group.load_state_dict(good), "Adam.load_state_dict", "has 2 parameter groups",
                     "the optimizer has 1");
  optim::Adam other_split({OptimizerParamGroup({ps[0]}), OptimizerParamGroup({ps[1], ps[2]})});
  EXPECT_EMBER_ERROR(other_split.load_state_dict(good),
                     "parameter group 0 has 2 parameters in the state dict, 1 in "
                     "the optimizer");
  EXPECT_EMBER_ERROR(target->load_state_dict(edited([](StateDict& sd) { sd.metadata.erase("optimizer"); })),
                     "Adam.load_state_dict: the state dict has no optimizer");
  EXPECT_EMBER_ERROR(
      target->load_state_dict(edited([](StateDict& sd) { sd.metadata.erase("param_groups.1.eps"); })),
      "the state dict has no param_groups.1.eps");
  EXPECT_EMBER_ERROR(
      target->load_state_dict(edited([](StateDict& sd) { sd.metadata["param_groups.0.lr"] = "fast"; })),
      "param_groups.0.lr is \"fast\", not a number");
  EXPECT_EMBER_ERROR(
      target->load_state_dict(edited([](StateDict& sd) { sd.metadata["param_groups.0.betas"] = "0.9"; })),
      "param_groups.0.betas is \"0.9\", not two numbers");
  EXPECT_EMBER_ERROR(
      target->load_state_dict(edited([](StateDict& sd) { sd.metadata["param_groups.0.amsgrad"] = "yes"; })),
      "param_groups.0.amsgrad is \"yes\", not true or false");
  EXPECT_EMBER_ERROR(
      target->load_state_dict(edited([](StateDict& sd) { sd.metadata["param_groups.0.lr"] = "-1"; })),
      "Adam: invalid learning rate: -1");
  EXPECT_EMBER_ERROR(target->load_state_dict(edited([](StateDict& sd) {
    sd.tensors.set("state.0.exp_avg", zeros({3, 2}));
  })),
                     "state.0.exp_avg has shape [3, 2], parameter 0 has shape [2, 3]");
  EXPECT_EMBER_ERROR(target->load_state_dict(edited(
                         [](StateDict& sd) { sd.tensors.insert("state.1.momentum_buffer", zeros({4})); })),
                     "unexpected tensor state.1.momentum_buffer");
  EXPECT_EMBER_ERROR(target->load_state_dict(
                         edited([](StateDict& sd) { sd.tensors.insert("state.7.exp_avg", zeros({4})); })),
                     "state.7.exp_avg names parameter 7, the optimizer has 3");
  EXPECT_EMBER_ERROR(
      target->load_state_dict(edited([](StateDict& sd) { sd.tensors.insert("stat.0.exp_avg", zeros({4})); })),
      "unexpected tensor stat.0.exp_avg");
  EXPECT_EMBER_ERROR(target->load_state_dict(edited([](StateDict& sd) { sd.metadata["state.0.lr"] = "1"; })),
                     "unexpected entry state.0.lr");
  EXPECT_EMBER_ERROR(
      target->load_state_dict(edited([](StateDict& sd) { sd.metadata.erase("state.2.step"); })),
      "the state of parameter 2 has no step count (state.2.step)");
  EXPECT_EMBER_ERROR(target->load_state_dict(edited([](StateDict& sd) {
    OrderedDict<Tensor> kept;
    for (const auto& [k, t] : sd.tensors)
      if (k != "state.1.exp_avg_sq") kept.insert(k, t);
    sd.tensors = kept;
  })),
                     "the state of parameter 1 has no exp_avg_sq (state.1.exp_avg_sq)");
  EXPECT_EMBER_ERROR(
      target->load_state_dict(edited([](StateDict& sd) { sd.metadata["param_groups.1.amsgrad"] = "true"; })),
      "the state of parameter 2 has no max_exp_avg_sq");
  // Nothing of the failed loads stuck.
  EXPECT_TRUE(target->state().empty());
  EXPECT_EQ(target->param_groups()[0].options().get_lr(), 0.1);
  target->load_state_dict(good);
  EXPECT_EQ(target->state().size(), 3u);
}

// Three steps from (1, -2, 0.5) with the gradients (0.1, -0.3, 0.2) * t, as the references below
// took them: PyTorch's _single_tensor_rmsprop and _single_tensor_adagrad evaluated in float64
// (Python).
template <class Opt, class Options>
Tensor three_steps(const Options& o) {
  Tensor p = tensor({1.0, -2.0, 0.5}, kFloat64).requires_grad_();
  Opt opt({p}, o);
  for (int t = 1; t <= 3; ++t) {
    p.set_grad(tensor({0.1, -0.3, 0.2}, kFloat64) * t);
    opt.step();
  }
  return p.detach();
}

TEST(RMSprop, MatchesPyTorchsUpdate) {
  using optim::RMSpropOptions;
  auto run = three_steps<optim::RMSprop, RMSpropOptions>;
  EXPECT_CLOSE(run(RMSpropOptions()),
               tensor({0.7301174159932009, -1.7301173082594379, 0.23011733519288902}, kFloat64));
  EXPECT_CLOSE(run(RMSpropOptions(0.05).alpha(0.9).weight_decay(0.1).momentum(0.9).centered(true)),
               tensor({0.1363879678529052, -1.1233641927152505, -0.3859465347443805}, kFloat64));
  EXPECT_CLOSE(run(RMSpropOptions().maximize(true)),
               tensor({1.269882584006799, -2.269882691740562, 0.7698826648071111}, kFloat64));
  EXPECT_EMBER_ERROR(optim::RMSprop({tensor({1.0}).requires_grad_()}, RMSpropOptions(-1)), "RMSprop",
                     "learning rate");
}

TEST(Adagrad, MatchesPyTorchsUpdate) {
  using optim::AdagradOptions;
  auto run = three_steps<optim::Adagrad, AdagradOptions>;
  EXPECT_CLOSE(run(AdagradOptions()),
               tensor({0.973037890848771, -1.973037890838009, 0.4730378908406995}, kFloat64));
  EXPECT_CLOSE(run(AdagradOptions(0.1).lr_decay(0.5).weight_decay(0.1).initial_accumulator_value(0.2)),
               tensor({0.8964291009046572, -1.838415691972729, 0.37315784367948857}, kFloat64));
  EXPECT_CLOSE(run(AdagradOptions().maximize(true)),
               tensor({1.026962109151229, -2.0269621091619907, 0.5269621091593005}, kFloat64));
  EXPECT_EMBER_ERROR(optim::Adagrad({tensor({1.0}).requires_grad_()}, AdagradOptions().lr_decay(-1)),
                     "Adagrad", "lr_decay");
}

}  // namespace
}  // namespace ember::testing
