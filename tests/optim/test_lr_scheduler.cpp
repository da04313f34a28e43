// LR schedulers against PyTorch's lr sequences: two parameter groups (lr 0.1 and 0.05), the lrs
// after construction and after each of 20 steps, bit for bit. Numbers from PyTorch 2.15:
//
//   import torch
//   from torch.optim import lr_scheduler as S
//   def opt(kind="sgd"):
//       ps = [torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)]
//       groups = [{"params": [ps[0]], "lr": 0.1}, {"params": [ps[1]], "lr": 0.05}]
//       return torch.optim.SGD(groups, momentum=0.9) if kind == "sgd" else torch.optim.Adam(groups)
//   def seq(make, n=20, kind="sgd", mom=False):
//       o = opt(kind); s = make(o); lrs, moms = [], []
//       for _ in range(n + 1):
//           lrs += s.get_last_lr()
//           if mom: moms += [g["momentum"] if kind == "sgd" else g["betas"][0] for g in o.param_groups]
//           o.step(); s.step()
//       return lrs, moms
//   cases = {
//     "step": lambda o: S.StepLR(o, step_size=3, gamma=0.5),
//     "multistep": lambda o: S.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.3),
//     "exponential": lambda o: S.ExponentialLR(o, gamma=0.9),
//     "cosine": lambda o: S.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
//     "linear": lambda o: S.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=6),
//     "lambda": lambda o: S.LambdaLR(o, [lambda e: 0.95 ** e, lambda e: 1.0 / (e + 1)]),
//     "sequential": lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=4),
//     S.CosineAnnealingLR(o, T_max=10), S.StepLR(o, 2, 0.5)], milestones=[4, 12]),
//   }
//   for name, make in cases.items():
//       lrs, _ = seq(make)
//       print(name, "{" + ", ".join(repr(v) for v in lrs) + "}")
//   oc = {
//     "onecycle_cos": (lambda o: S.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=20), "sgd"),
//     "onecycle_linear_three_phase_adam": (lambda o: S.OneCycleLR(o, max_lr=0.3, total_steps=20,
//     pct_start=0.25, anneal_strategy="linear", three_phase=True, div_factor=10, final_div_factor=100,
//     base_momentum=0.8, max_momentum=0.9), "adam"),
//   }
//   for name, (make, kind) in oc.items():
//       lrs, moms = seq(make, n=19, kind=kind, mom=True)
//       print(name, "{" + ", ".join(repr(v) for v in lrs) + "}")
//       print(name + "_momentum", "{" + ", ".join(repr(v) for v in moms) + "}")
#include <cmath>
#include <numbers>

#include "test_util.h"

namespace ember::testing {
namespace {

std::vector<Tensor> two_params() { return {zeros({1}).requires_grad_(), zeros({1}).requires_grad_()}; }

std::vector<optim::OptimizerParamGroup> two_groups(const std::vector<Tensor>& ps) {
  return {optim::OptimizerParamGroup(
              {ps[0]}, std::make_unique<optim::SGDOptions>(optim::SGDOptions(0.1).momentum(0.9))),
          optim::OptimizerParamGroup(
              {ps[1]}, std::make_unique<optim::SGDOptions>(optim::SGDOptions(0.05).momentum(0.9)))};
}

// The lrs (and the groups' momentum) after construction and after each of `steps` steps.
struct Sequence {
  std::vector<double> lrs, momentum;
};
Sequence record(optim::Optimizer& opt, optim::LRScheduler& sched, int steps) {
  Sequence s;
  for (int i = 0; i <= steps; ++i) {
    for (double lr : sched.get_last_lr()) s.lrs.push_back(lr);
    for (size_t k = 0; k < opt.param_groups().size(); ++k) {
      const optim::OptimizerOptions& o = opt.param_groups()[k].options();
      EXPECT_EQ(o.get_lr(), sched.get_last_lr()[k]);  // the scheduler sets what it reports
      s.momentum.push_back(o.get_momentum());
    }
    opt.step();
    sched.step();
  }
  return s;
}

// Compares exactly, naming the first index that differs.
void expect_same(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "at index " << i;
}

using MakeScheduler = std::function<std::shared_ptr<optim::LRScheduler>(optim::Optimizer&)>;

struct Case {
  const char* name;
  MakeScheduler make;
  std::vector<double> lrs;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"step",
       [](optim::Optimizer& o) -> std::shared_ptr<optim::LRScheduler> {
         return std::make_shared<optim::StepLR>(o, 3, 0.5);
       },
       {0.1,       0.05,       0.1,       0.05,       0.1,       0.05,      0.05,      0.025,    0.05,
        0.025,     0.05,       0.025,     0.025,      0.0125,    0.025,     0.0125,    0.025,    0.0125,
        0.0125,    0.00625,    0.0125,    0.00625,    0.0125,    0.00625,   0.00625,   0.003125, 0.00625,
        0.003125,  0.00625,    0.003125,  0.003125,   0.0015625, 0.003125,  0.0015625, 0.003125, 0.0015625,
        0.0015625, 0.00078125, 0.0015625, 0.00078125, 0.0015625, 0.00078125}},
      {"multistep",
       [](optim::Optimizer& o) -> std::shared_ptr<optim::LRScheduler> {
         return std::make_shared<optim::MultiStepLR>(o, std::vector<int64_t>{2, 5, 5, 9}, 0.3);
       },
       {0.1,
        0.05,
        0.1,
        0.05,
        0.03,
        0.015,
        0.03,
        0.015,
        0.03,
        0.015,
        0.0026999999999999997,
        0.0013499999999999999,
        0.0026999999999999997,
        0.0013499999999999999,
        0.0026999999999999997,
        0.0013499999999999999,
        0.0026999999999999997,
        0.0013499999999999999,
        0.0008099999999999998,
        0.0004049999999999999,
        0.0008099999999999998,
        0.0004049999999999999,
        0.0008099999999999998,
        0.0004049999999999999,
        0.0008099999999999998,
        0.0004049999999999999,
        0.0008099999999999998,
        0.0004049999999999999,
        0.0008099999999999998,
        0.0004049999999999999,
        0.0008099999999999998,
        0.0004049999999999999,
        0.0008099999999999998,
        0.0004049999999999999,
        0.0008099999999999998,
        0.0004049999999999999,
        0.0008099999999999998,
        0.0004049999999999999,
        0.0008099999999999998,
        0.0004049999999999999,
        0.0008099999999999998,
        0.0004049999999999999}},
      {"exponential",
       [](optim::Optimizer& o) -> std::shared_ptr<optim::LRScheduler> {
         return std::make_shared<optim::ExponentialLR>(o, 0.9);
       },
       {0.1,
        0.05,
        0.09000000000000001,
        0.045000000000000005,
        0.08100000000000002,
        0.04050000000000001,
        0.07290000000000002,
        0.03645000000000001,
        0.06561000000000002,
        0.03280500000000001,
        0.05904900000000002,
        0.02952450000000001,
        0.05314410000000002,
        0.02657205000000001,
        0.04782969000000002,
        0.02391484500000001,
        0.043046721000000024,
        0.021523360500000012,
        0.03874204890000002,
        0.01937102445000001,
        0.03486784401000002,
        0.01743392200500001,
        0.03138105960900001,
        0.015690529804500006,
        0.028242953648100012,
        0.014121476824050006,
        0.025418658283290013,
        0.012709329141645007,
        0.022876792454961013,
        0.011438396227480507,
        0.020589113209464913,
        0.010294556604732457,
        0.01853020188851842,
        0.00926510094425921,
        0.01667718169966658,
        0.00833859084983329,
        0.015009463529699923,
        0.007504731764849962,
        0.013508517176729932,
        0.006754258588364966,
        0.01215766545905694,
        0.00607883272952847}},
      {"cosine",
       [](optim::Optimizer& o) -> std::shared_ptr<optim::LRScheduler> {
         return std::make_shared<optim::CosineAnnealingLR>(o, 7, 0.001);
       },
       {0.1,
        0.05,
        0.09509795896116975,
        0.04757373726360927,
        0.08136274519200731,
        0.040775500145538976,
        0.061514786230837566,
        0.030951762881929707,
        0.03948521376916245,
        0.020048237118070304,
        0.019637254807992697,
        0.010224499854461031,
        0.005902041038830259,
        0.0034262627363907338,
        0.001,
        0.001,
        0.005902041038830253,
        0.003426262736390731,
        0.019637254807992683,
        0.010224499854461024,
        0.03948521376916243,
        0.020048237118070293,
        0.061514786230837525,
        0.03095176288192968,
        0.08136274519200731,
        0.04077550014553897,
        0.09509795896116978,
        0.04757373726360928,
        0.10000000000000002,
        0.05,
        0.09509795896116978,
        0.04757373726360928,
        0.08136274519200734,
        0.04077550014553898,
        0.06151478623083755,
        0.030951762881929693,
        0.03948521376916246,
        0.020048237118070307,
        0.019637254807992707,
        0.010224499854461035,
        0.005902041038830264,
        0.003426262736390736}},
      {"linear",
       [](optim::Optimizer& o) -> std::shared_ptr<optim::LRScheduler> {
         return std::make_shared<optim::LinearLR>(o, 0.25, 0.9, 6);
       },
       {0.025,
        0.0125,
        0.035833333333333335,
        0.017916666666666668,
        0.046666666666666676,
        0.023333333333333338,
        0.057500000000000016,
        0.028750000000000008,
        0.06833333333333334,
        0.03416666666666667,
        0.07916666666666669,
        0.039583333333333345,
        0.09000000000000002,
        0.04500000000000001,
        0.09000000000000002,
        0.04500000000000001,
        0.09000000000000002,
        0.04500000000000001,
        0.09000000000000002,
        0.04500000000000001,
        0.09000000000000002,
        0.04500000000000001,
        0.09000000000000002,
        0.04500000000000001,
        0.09000000000000002,
        0.04500000000000001,
        0.09000000000000002,
        0.04500000000000001,
        0.09000000000000002,
        0.04500000000000001,
        0.09000000000000002,
        0.04500000000000001,
        0.09000000000000002,
        0.04500000000000001,
        0.09000000000000002,
        0.04500000000000001,
        0.09000000000000002,
        0.04500000000000001,
        0.09000000000000002,
        0.04500000000000001,
        0.09000000000000002,
        0.04500000000000001}},
      {"lambda",
       [](optim::Optimizer& o) -> std::shared_ptr<optim::LRScheduler> {
         return std::make_shared<optim::LambdaLR>(
             o, std::vector<optim::LambdaLR::Lambda>{
                    [](int64_t e) { return std::pow(0.95, static_cast<double>(e)); },
                    [](int64_t e) { return 1.0 / static_cast<double>(e + 1); }});
       },
       {0.1,
        0.05,
        0.095,
        0.025,
        0.09025,
        0.016666666666666666,
        0.0857375,
        0.0125,
        0.081450625,
        0.010000000000000002,
        0.07737809374999999,
        0.008333333333333333,
        0.07350918906249998,
        0.007142857142857143,
        0.06983372960937498,
        0.00625,
        0.06634204312890622,
        0.005555555555555556,
        0.0630249409724609,
        0.005000000000000001,
        0.05987369392383787,
        0.004545454545454546,
        0.05688000922764597,
        0.004166666666666667,
        0.05403600876626367,
        0.0038461538461538464,
        0.051334208327950485,
        0.0035714285714285713,
        0.04876749791155296,
        0.0033333333333333335,
        0.046329123015975304,
        0.003125,
        0.04401266686517654,
        0.0029411764705882353,
        0.04181203352191771,
        0.002777777777777778,
        0.039721431845821824,
        0.002631578947368421,
        0.03773536025353073,
        0.0025000000000000005,
        0.03584859224085419,
        0.002380952380952381}},
      {"sequential",
       [](optim::Optimizer& o) -> std::shared_ptr<optim::LRScheduler> {
         return std::make_shared<optim::SequentialLR>(o,
                                                      std::vector<std::shared_ptr<optim::LRScheduler>>{
                                                          std::make_shared<optim::LinearLR>(o, 0.1, 1.0, 4),
                                                          std::make_shared<optim::CosineAnnealingLR>(o, 10),
                                                          std::make_shared<optim::StepLR>(o, 2, 0.5)},
                                                      std::vector<int64_t>{4, 12});
       },
       {0.010000000000000002,
        0.005000000000000001,
        0.03250000000000001,
        0.016250000000000004,
        0.055000000000000014,
        0.027500000000000007,
        0.07750000000000003,
        0.038750000000000014,
        0.1,
        0.05,
        0.09755282581475769,
        0.048776412907378844,
        0.09045084971874738,
        0.04522542485937369,
        0.07938926261462367,
        0.03969463130731184,
        0.06545084971874739,
        0.03272542485937369,
        0.05000000000000001,
        0.025000000000000005,
        0.03454915028125264,
        0.01727457514062632,
        0.020610737385376353,
        0.010305368692688176,
        0.1,
        0.05,
        0.1,
        0.05,
        0.05,
        0.025,
        0.05,
        0.025,
        0.025,
        0.0125,
        0.025,
        0.0125,
        0.0125,
        0.00625,
        0.0125,
        0.00625,
        0.00625,
        0.003125}},
  };
  return c;
}

TEST(LRScheduler, MatchesPyTorch) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> ps = two_params();
    optim::SGD opt(two_groups(ps));
    std::shared_ptr<optim::LRScheduler> sched = c.make(opt);
    expect_same(record(opt, *sched, 20).lrs, c.lrs);
  }
}

TEST(LRScheduler, OneCycleCosineWithSGDMomentum) {
  std::vector<Tensor> ps = two_params();
  optim::SGD opt(two_groups(ps));
  optim::OneCycleLR sched(opt, {1.0, 0.5}, 20);
  Sequence s = record(opt, sched, 19);
  expect_same(s.lrs, {0.040000000000000036,
                      0.020000000000000018,
                      0.1316718427000253,
                      0.06583592135001265,
                      0.3716718427000253,
                      0.18583592135001265,
                      0.6683281572999747,
                      0.3341640786499874,
                      0.9083281572999747,
                      0.45416407864998737,
                      1.0,
                      0.5,
                      0.9874640062350873,
                      0.49373200311754367,
                      0.9504846320134737,
                      0.47524231600673683,
                      0.89091617757105,
                      0.445458088785525,
                      0.8117456539497631,
                      0.40587282697488153,
                      0.7169430017913008,
                      0.3584715008956504,
                      0.6112620219362893,
                      0.30563101096814466,
                      0.500002,
                      0.250001,
                      0.38874197806371075,
                      0.19437098903185537,
                      0.28306099820869923,
                      0.14153049910434962,
                      0.18825834605023697,
                      0.09412917302511849,
                      0.10908782242895004,
                      0.05454391121447502,
                      0.049519367986526286,
                      0.024759683993263143,
                      0.012539993764912554,
                      0.006269996882456277,
                      4e-06,
                      2e-06});
  expect_same(s.momentum, {0.95,
                           0.95,
                           0.9404508497187474,
                           0.9404508497187474,
                           0.9154508497187474,
                           0.9154508497187474,
                           0.8845491502812526,
                           0.8845491502812526,
                           0.8595491502812526,
                           0.8595491502812526,
                           0.85,
                           0.85,
                           0.8512536043909088,
                           0.8512536043909088,
                           0.854951556604879,
                           0.854951556604879,
                           0.8609084258765984,
                           0.8609084258765984,
                           0.8688255099070633,
                           0.8688255099070633,
                           0.878305813044122,
                           0.878305813044122,
                           0.8888739533021842,
                           0.8888739533021842,
                           0.8999999999999999,
                           0.8999999999999999,
                           0.9111260466978157,
                           0.9111260466978157,
                           0.9216941869558779,
                           0.9216941869558779,
                           0.9311744900929366,
                           0.9311744900929366,
                           0.9390915741234015,
                           0.9390915741234015,
                           0.945048443395121,
                           0.945048443395121,
                           0.9487463956090911,
                           0.9487463956090911,
                           0.95,
                           0.95});
}

TEST(LRScheduler, OneCycleLinearThreePhaseWithAdamBeta1) {
  std::vector<Tensor> ps = two_params();
  optim::Adam opt({optim::OptimizerParamGroup({ps[0]}, std::make_unique<optim::AdamOptions>(0.1)),
                   optim::OptimizerParamGroup({ps[1]}, std::make_unique<optim::AdamOptions>(0.05))});
  optim::OneCycleLR sched(opt, {0.3}, 20,
                          {.pct_start = 0.25,
                           .anneal_strategy = "linear",
                           .base_momentum = {0.8},
                           .max_momentum = {0.9},
                           .div_factor = 10,
                           .final_div_factor = 100,
                           .three_phase = true});
  Sequence s = record(opt, sched, 19);
  expect_same(s.lrs, {0.03,
                      0.03,
                      0.0975,
                      0.0975,
                      0.165,
                      0.165,
                      0.2325,
                      0.2325,
                      0.30000000000000004,
                      0.30000000000000004,
                      0.23249999999999998,
                      0.23249999999999998,
                      0.16499999999999998,
                      0.16499999999999998,
                      0.09749999999999998,
                      0.09749999999999998,
                      0.02999999999999997,
                      0.02999999999999997,
                      0.027299999999999998,
                      0.027299999999999998,
                      0.0246,
                      0.0246,
                      0.021900000000000003,
                      0.021900000000000003,
                      0.019200000000000002,
                      0.019200000000000002,
                      0.0165,
                      0.0165,
                      0.013800000000000003,
                      0.013800000000000003,
                      0.011100000000000002,
                      0.011100000000000002,
                      0.008400000000000001,
                      0.008400000000000001,
                      0.0057,
                      0.0057,
                      0.0030000000000000027,
                      0.0030000000000000027,
                      0.00030000000000000165,
                      0.00030000000000000165});
  expect_same(s.momentum, {0.9,
                           0.9,
                           0.875,
                           0.875,
                           0.8500000000000001,
                           0.8500000000000001,
                           0.8250000000000001,
                           0.8250000000000001,
                           0.8,
                           0.8,
                           0.8250000000000001,
                           0.8250000000000001,
                           0.8500000000000001,
                           0.8500000000000001,
                           0.875,
                           0.875,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9,
                           0.9});
}

// Saved mid-way and restored into a new optimizer and scheduler (made first, as in PyTorch: making
// a scheduler resets the lrs), the schedule continues exactly.
TEST(LRScheduler, StateDictResumesTheSchedule) {
  std::vector<Case> all = cases();
  all.push_back({"onecycle",
                 [](optim::Optimizer& o) -> std::shared_ptr<optim::LRScheduler> {
                   return std::make_shared<optim::OneCycleLR>(o, std::vector<double>{1.0, 0.5}, 25);
                 },
                 {}});
  for (const Case& c : all) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> ps = two_params();
    optim::SGD opt(two_groups(ps));
    std::shared_ptr<optim::LRScheduler> sched = c.make(opt);
    Sequence straight = record(opt, *sched, 20);

    std::vector<Tensor> ps1 = two_params();
    optim::SGD opt1(two_groups(ps1));
    std::shared_ptr<optim::LRScheduler> sched1 = c.make(opt1);
    record(opt1, *sched1, 7);
    const StateDict opt_state = opt1.state_dict(), sched_state = sched1->state_dict();
    EXPECT_EQ(sched_state.metadata.at("scheduler"), sched1->name());
    EXPECT_EQ(sched_state.metadata.at("last_epoch"), "8");

    std::vector<Tensor> ps2 = two_params();
    optim::SGD opt2(two_groups(ps2));
    std::shared_ptr<optim::LRScheduler> sched2 = c.make(opt2);
    opt2.load_state_dict(opt_state);
    sched2->load_state_dict(sched_state);
    Sequence rest = record(opt2, *sched2, 12);
    expect_same(rest.lrs, std::vector<double>(straight.lrs.begin() + 16, straight.lrs.end()));
    expect_same(rest.momentum, std::vector<double>(straight.momentum.begin() + 16, straight.momentum.end()));
  }
}

// An optimizer defined outside ember, without momentum: the base class is all it needs.
class PlainOptions : public optim::OptimizerOptions {
 public:
  explicit PlainOptions(double lr) : lr_(lr) {}
  std::unique_ptr<optim::OptimizerOptions> clone() const override {
    return std::make_unique<PlainOptions>(*this);
  }
  const char* optimizer_name() const override { return "Plain"; }
  void validate() const override {}
  void visit(optim::OptionVisitor& v) override { v("lr", lr_); }
  double get_lr() const override { return lr_; }
  void set_lr(double lr) override { lr_ = lr; }

 private:
  double lr_;
};

class Plain : public optim::Optimizer {
 public:
  explicit Plain(std::vector<Tensor> params)
      : Optimizer({optim::OptimizerParamGroup(std::move(params))}, std::make_unique<PlainOptions>(0.5)) {}

 protected:
  void step_group(optim::OptimizerParamGroup& g) override {
    for (const Tensor& p : g.params())
      if (p.grad().defined()) p.sub_(p.grad(), g.options().get_lr());
  }
  std::vector<std::string> state_buffer_names(const optim::OptimizerOptions&) const override { return {}; }
  bool counts_steps() const override { return false; }
};

TEST(LRScheduler, UserDefinedOptimizer) {
  Tensor w = zeros({2}).requires_grad_();
  Plain opt({w});
  optim::StepLR sched(opt, 1, 0.5);
  w.set_grad(ones({2}));
  opt.step();
  sched.step();
  EXPECT_CLOSE(w, full({2}, -0.5), Tolerance{0, 0});
  EXPECT_EQ(opt.param_groups()[0].options().get_lr(), 0.25);
  EXPECT_EQ(opt.state_dict().metadata.at("param_groups.0.lr"), "0.25");
  EXPECT_EMBER_ERROR(opt.defaults().get_momentum(), "Plain: the optimizer has no momentum");
  EXPECT_EMBER_ERROR(optim::OneCycleLR(opt, {1.0}, 10),
                     "OneCycleLR: the optimizer must support momentum or beta1", "Plain has neither");
  optim::OneCycleLR no_momentum(opt, {1.0}, 10, {.cycle_momentum = false});
  EXPECT_EQ(no_momentum.get_last_lr()[0], 0.040000000000000036);  // as the two-group case above
}

TEST(LRScheduler, RefusesBadArguments) {
  std::vector<Tensor> ps = two_params();
  optim::SGD opt(two_groups(ps));
  using Lambda = optim::LambdaLR::Lambda;
  EXPECT_EMBER_ERROR(optim::StepLR(opt, 0), "StepLR: step_size must be positive, got 0");
  EXPECT_EMBER_ERROR(optim::CosineAnnealingLR(opt, -3), "CosineAnnealingLR: T_max must be positive, got -3");
  EXPECT_EMBER_ERROR(optim::LinearLR(opt, 0.0), "LinearLR: start_factor must be in (0, 1], got 0");
  EXPECT_EMBER_ERROR(optim::LinearLR(opt, 0.5, 1.5), "LinearLR: end_factor must be in [0, 1], got 1.5");
  EXPECT_EMBER_ERROR(optim::LinearLR(opt, 0.5, 1.0, 0), "LinearLR: total_iters must be positive, got 0");
  EXPECT_EMBER_ERROR(optim::LambdaLR(opt, std::vector<Lambda>{[](int64_t) { return 1.0; }}),
                     "LambdaLR: expected 2 lr_lambdas (one per parameter group), but got 1");
  EXPECT_EMBER_ERROR(optim::LambdaLR(opt, Lambda()), "LambdaLR: lr_lambdas[0] is empty");
  EXPECT_EMBER_ERROR(optim::OneCycleLR(opt, {1.0}, 0),
                     "OneCycleLR: expected a positive total_steps, but got 0");
  EXPECT_EMBER_ERROR(optim::OneCycleLR(opt, {1.0}, 10, {.pct_start = 1.5}),
                     "OneCycleLR: expected pct_start between 0 and 1, but got 1.5");
  EXPECT_EMBER_ERROR(optim::OneCycleLR(opt, {1.0}, 10, {.anneal_strategy = "cosine"}),
                     "OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', instead got 'cosine'");
  EXPECT_EMBER_ERROR(optim::OneCycleLR(opt, {1.0, 2.0, 3.0}, 10),
                     "OneCycleLR: max_lr must have one value or one per parameter group (2), got 3");
  EXPECT_EMBER_ERROR(optim::OneCycleLR(opt, {1.0}, 10, {.max_momentum = {}}),
                     "OneCycleLR: max_momentum must have one value or one per parameter group (2), got 0");
  EXPECT_EMBER_ERROR(optim::OneCycleLR(opt, {1.0}, 2, {.pct_start = 0.5}),
                     "OneCycleLR: phase 0 has no steps");

  optim::OneCycleLR short_cycle(opt, {1.0}, 3);
  for (int i = 0; i < 3; ++i) short_cycle.step();
  EXPECT_EMBER_ERROR(short_cycle.step(),
                     "OneCycleLR: tried to step 4 times. The specified number of total steps is 3");

  auto step_lr = std::make_shared<optim::StepLR>(opt, 2);
  std::vector<Tensor> other_ps = two_params();
  optim::SGD other(two_groups(other_ps));
  auto elsewhere = std::make_shared<optim::StepLR>(other, 2);
  using List = std::vector<std::shared_ptr<optim::LRScheduler>>;
  EXPECT_EMBER_ERROR(optim::SequentialLR(opt, List{}, {}), "SequentialLR: expects at least one scheduler");
  EXPECT_EMBER_ERROR(optim::SequentialLR(opt, List{step_lr, nullptr}, {3}),
                     "SequentialLR: scheduler 1 is null");
  EXPECT_EMBER_ERROR(optim::SequentialLR(opt, List{step_lr, elsewhere}, {3}),
                     "SequentialLR: expects all schedulers to belong to the same optimizer",
                     "scheduler 1 (StepLR)");
  EXPECT_EMBER_ERROR(
      optim::SequentialLR(opt, List{step_lr, step_lr}, {3, 5}),
      "SequentialLR: expects one milestone fewer than schedulers, but got 2 schedulers and 2 milestones");
  EXPECT_EMBER_ERROR(optim::SequentialLR(opt, List{step_lr, step_lr, step_lr}, {5, 3}),
                     "SequentialLR: milestones must be increasing");

  // A group added after the scheduler was made.
  optim::ExponentialLR exp_lr(opt, 0.5);
  Tensor extra = zeros({1}).requires_grad_();
  opt.add_param_group(optim::OptimizerParamGroup({extra}));
  EXPECT_EMBER_ERROR(exp_lr.step(),
                     "ExponentialLR: the optimizer has 3 parameter groups, the scheduler was made for 2");
}

TEST(LRScheduler, LoadStateDictRefusesWhatDoesNotMatch) {
  std::vector<Tensor> ps = two_params();
  optim::SGD opt(two_groups(ps));
  optim::StepLR step_lr(opt, 2);
  const StateDict good = step_lr.state_dict();
  optim::ExponentialLR exp_lr(opt, 0.5);
  EXPECT_EMBER_ERROR(exp_lr.load_state_dict(good),
                     "ExponentialLR.load_state_dict: the state dict is from StepLR, not ExponentialLR");
  optim::SGD one_group(std::vector<Tensor>{zeros({1}).requires_grad_()});
  optim::StepLR one(one_group, 2);
  EXPECT_EMBER_ERROR(one.load_state_dict(good),
                     "StepLR.load_state_dict: the state dict has lrs for 2 parameter "
                     "groups, the optimizer has 1");
  StateDict bad = good;
  bad.metadata.erase("last_epoch");
  EXPECT_EMBER_ERROR(step_lr.load_state_dict(bad),
                     "StepLR.load_state_dict: the state dict has no last_epoch");
  bad = good;
  bad.metadata["base_lrs"] = "0.1,x";
  EXPECT_EMBER_ERROR(step_lr.load_state_dict(bad), "StepLR.load_state_dict: base_lrs is \"x\", not a number");
}

// PolynomialLR's recursive lrs are its closed form, base * (1 - min(e, T) / T)^power, by hand:
// lr 0.1, T = 4, power 2 gives 0.1, 0.05625, 0.025, 0.00625, then 0.
TEST(LRScheduler, PolynomialDecaysToZeroAndStays) {
  std::vector<Tensor> ps = two_params();
  optim::SGD opt(two_groups(ps));
  optim::PolynomialLR sched(opt, 4, 2.0);
  const std::vector<double> lrs = record(opt, sched, 6).lrs;
  const double want[] = {0.1, 0.05625, 0.025, 0.00625, 0, 0, 0};
  for (int e = 0; e <= 6; ++e) {
    EXPECT_NEAR(lrs[2 * e], want[e], 1e-15) << "epoch " << e;
    EXPECT_NEAR(lrs[2 * e + 1], want[e] / 2, 1e-15) << "epoch " << e;
  }
  EXPECT_EMBER_ERROR(optim::PolynomialLR(opt, 0), "PolynomialLR", "total_iters");
}

// SGDR with T_0 = 3, T_mult = 2: periods of 3, 6, 12 epochs, each a cosine from the base lr down
// towards eta_min, by hand; step(5.5) lands 2.5 epochs into the second period.
TEST(LRScheduler, CosineAnnealingWarmRestartsRestartsWithLongerPeriods) {
  std::vector<Tensor> ps = two_params();
  optim::SGD opt(two_groups(ps));
  optim::CosineAnnealingWarmRestarts sched(opt, 3, 2, 0.01);
  auto lr = [](double base, double t_cur, double t_i) {
    return 0.01 + (base - 0.01) * (1 + std::cos(std::numbers::pi * t_cur / t_i)) / 2;
  };
  const std::vector<double> lrs = record(opt, sched, 10).lrs;
  const std::pair<double, double> at[] = {{0, 3}, {1, 3}, {2, 3}, {0, 6},  {1, 6}, {2, 6},
                                          {3, 6}, {4, 6}, {5, 6}, {0, 12}, {1, 12}};
  for (int e = 0; e <= 10; ++e) {
    EXPECT_NEAR(lrs[2 * e], lr(0.1, at[e].first, at[e].second), 1e-15) << "epoch " << e;
    EXPECT_NEAR(lrs[2 * e + 1], lr(0.05, at[e].first, at[e].second), 1e-15) << "epoch " << e;
  }
  sched.step(5.5);
  EXPECT_NEAR(sched.get_last_lr()[0], lr(0.1, 2.5, 6), 1e-15);
  EXPECT_EQ(sched.last_epoch(), 5);
  // The state resumes the schedule.
  optim::SGD opt2(two_groups(two_params()));
  optim::CosineAnnealingWarmRestarts resumed(opt2, 3, 2, 0.01);
  resumed.load_state_dict(sched.state_dict());
  sched.step();
  resumed.step();
  EXPECT_EQ(resumed.get_last_lr(), sched.get_last_lr());
  EXPECT_NEAR(sched.get_last_lr()[0], lr(0.1, 3.5, 6), 1e-15);
  EXPECT_EMBER_ERROR(optim::CosineAnnealingWarmRestarts(opt, 0), "CosineAnnealingWarmRestarts", "T_0");
  EXPECT_EMBER_ERROR(sched.step(-1.0), "CosineAnnealingWarmRestarts", "non-negative epoch");
}

// ReduceLROnPlateau, PyTorch's rules by hand (factor 0.5, patience 2, cooldown 1): the lr halves
// on the third bad epoch in a row, the epoch after a cut is not counted, and min_lr is a floor.
TEST(LRScheduler, ReduceLROnPlateauHalvesAfterPatienceRunsOut) {
  std::vector<Tensor> ps = two_params();
  optim::SGD opt(two_groups(ps));
  optim::ReduceLROnPlateau plateau(opt, {.factor = 0.5, .patience = 2, .cooldown = 1, .min_lr = {0.03, 0.0}});
  const double metrics[] = {10, 9, 9.5, 9.4, 9.3, 9.2, 9.1, 9.05, 9.02, 9.01};
  const double want[][2] = {{0.1, 0.05},   {0.1, 0.05},   {0.1, 0.05},   {0.1, 0.05},    {0.05, 0.025},
                            {0.05, 0.025}, {0.05, 0.025}, {0.05, 0.025}, {0.03, 0.0125}, {0.03, 0.0125}};
  optim::SGD opt2(two_groups(two_params()));
  optim::ReduceLROnPlateau resumed(opt2,
                                   {.factor = 0.5, .patience = 2, .cooldown = 1, .min_lr = {0.03, 0.0}});
  for (int i = 0; i < 10; ++i) {
    SCOPED_TRACE("epoch " + std::to_string(i));
    plateau.step(metrics[i]);
    EXPECT_NEAR(plateau.get_last_lr()[0], want[i][0], 1e-15);
    EXPECT_NEAR(plateau.get_last_lr()[1], want[i][1], 1e-15);
    EXPECT_EQ(opt.param_groups()[0].options().get_lr(), plateau.get_last_lr()[0]);
    if (i == 5) {  // resume from here: the counters and the best metric travel
      resumed.load_state_dict(plateau.state_dict());
      for (size_t g = 0; g < 2; ++g) opt2.param_groups()[g].options().set_lr(plateau.get_last_lr()[g]);
    }
    if (i > 5) {
      resumed.step(metrics[i]);
      EXPECT_EQ(resumed.get_last_lr(), plateau.get_last_lr());
    }
  }
  EXPECT_EQ(plateau.best(), 9);  // nothing after 9 beat it by the relative threshold
  // "max" mode with an absolute threshold: a rise of less than 0.5 is no improvement.
  optim::SGD opt3(two_groups(two_params()));
  optim::ReduceLROnPlateau accuracy(
      opt3, {.mode = "max", .patience = 0, .threshold = 0.5, .threshold_mode = "abs"});
  accuracy.step(80);
  accuracy.step(80.4);
  EXPECT_NEAR(accuracy.get_last_lr()[0], 0.01, 1e-15);
  EXPECT_EQ(accuracy.best(), 80);
  EXPECT_EMBER_ERROR(optim::ReduceLROnPlateau(opt, {.factor = 1.0}), "ReduceLROnPlateau", "factor");
  EXPECT_EMBER_ERROR(optim::ReduceLROnPlateau(opt, {.mode = "up"}), "ReduceLROnPlateau", "mode");
  EXPECT_EMBER_ERROR(optim::ReduceLROnPlateau(opt, {.min_lr = {0, 0, 0}}), "ReduceLROnPlateau", "min_lr");
}

}  // namespace
}  // namespace ember::testing
