// SGD, Adam and AdamW against PyTorch: the same starting values and gradients (closed forms of
// the indices), parameters compared after 4 steps, in float64 and float32, per-tensor and fused.
// The expected numbers come from PyTorch 2.15 on the CPU (per-tensor path), this script:
//
//   import math, torch
//   def start(j, n): return [0.5 * math.sin(0.7 * i + 1.3 * j + 0.1) for i in range(n)]
//   def grad(j, n, s): return [math.cos(1.1 * i + 0.9 * j + 0.6 * s) for i in range(n)]
//   shapes = [(2, 3), (4,)]
//   def run(make, dtype, steps=4):
//       ps = [torch.tensor(start(j, math.prod(sh)), dtype=dtype).reshape(sh).requires_grad_() for j, sh in
//       enumerate(shapes)] opt = make(ps) for s in range(1, steps + 1):
//           for j, p in enumerate(ps): p.grad = torch.tensor(grad(j, p.numel(), s),
//           dtype=dtype).reshape(p.shape) opt.step()
//       return torch.cat([p.detach().reshape(-1) for p in ps]).tolist()
//   O = torch.optim
//   cases = {
//     "adam": lambda ps: O.Adam(ps, lr=0.1),
//     "adam_amsgrad_wd": lambda ps: O.Adam(ps, lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1,
//     amsgrad=True), "adam_maximize": lambda ps: O.Adam(ps, lr=0.02, weight_decay=0.05, maximize=True),
//     "adamw": lambda ps: O.AdamW(ps, lr=0.1, weight_decay=0.1),
//     "adamw_amsgrad_low_beta1": lambda ps: O.AdamW(ps, lr=0.1, betas=(0.3, 0.9), weight_decay=0.01,
//     amsgrad=True), "sgd": lambda ps: O.SGD(ps, lr=0.1), "sgd_momentum": lambda ps: O.SGD(ps, lr=0.1,
//     momentum=0.9), "sgd_dampening_wd": lambda ps: O.SGD(ps, lr=0.05, momentum=0.9, dampening=0.1,
//     weight_decay=0.01), "sgd_nesterov": lambda ps: O.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
//     weight_decay=0.1), "sgd_maximize": lambda ps: O.SGD(ps, lr=0.1, momentum=0.5, maximize=True),
//   }
//   for name, make in cases.items():
//       for dt in (torch.float64, torch.float32):
//           print(name, str(dt)[6:], "{" + ", ".join(repr(v) for v in run(make, dt)) + "}")
#include <cmath>

#include "test_util.h"

namespace ember::testing {
namespace {

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>, bool fused)>;

const std::vector<DimVector> kShapes = {{2, 3}, {4}};

Tensor from_formula(IntArrayRef shape, ScalarType dt, const std::function<double(int64_t)>& f) {
  std::vector<double> v;
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  for (int64_t i = 0; i < n; ++i) v.push_back(f(i));
  return tensor(v, kFloat64).to(dt).reshape(shape);
}

// `steps` steps from the script's start, params flattened and concatenated.
Tensor run(const MakeOptimizer& make, ScalarType dt, bool fused, int steps = 4) {
  std::vector<Tensor> ps;
  for (size_t j = 0; j < kShapes.size(); ++j)
    ps.push_back(from_formula(kShapes[j], dt, [&](int64_t i) {
                   return 0.5 * std::sin(0.7 * i + 1.3 * j + 0.1);
                 }).requires_grad_());
  std::unique_ptr<optim::Optimizer> opt = make(ps, fused);
  for (int s = 1; s <= steps; ++s) {
    for (size_t j = 0; j < ps.size(); ++j)
      ps[j].set_grad(
          from_formula(kShapes[j], dt, [&](int64_t i) { return std::cos(1.1 * i + 0.9 * j + 0.6 * s); }));
    opt->step();
  }
  std::vector<Tensor> flat;
  for (const Tensor& p : ps) flat.push_back(p.detach().reshape({-1}));
  return cat(flat);
}

struct Case {
  const char* name;
  MakeOptimizer make;
  std::vector<double> f64, f32;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"adam",
       [](std::vector<Tensor> ps, bool fused) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::Adam>(ps, optim::AdamOptions(0.1).fused(fused));
       },
       {-0.1918548217049513, 0.7288871754018003, 0.8802160307760352, 0.5963421577302109, -0.2652783898181549,
        -0.5921139346372141, 0.6248073982800565, 0.8220775520835406, 0.4206924812579025, -0.539962236605104},
       {-0.1918548047542572, 0.728887140750885, 0.8802160024642944, 0.596342146396637, -0.2652784287929535,
        -0.5921139121055603, 0.6248073577880859, 0.8220776319503784, 0.420692503452301, -0.5399622321128845}},
      {"adam_amsgrad_wd",
       [](std::vector<Tensor> ps, bool fused) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::Adam>(ps, optim::AdamOptions(0.05)
                                                      .betas({0.8, 0.99})
                                                      .eps(1e-6)
                                                      .weight_decay(0.1)
                                                      .amsgrad(true)
                                                      .fused(fused));
       },
       {-0.059408727438305386, 0.5479383887379852, 0.6842068836908873, 0.4787740234316902,
        -0.07748569998164787, -0.40048580595583033, 0.5603471912183589, 0.6241751707761415,
        0.27930187278712143, -0.3631180246648234},
       {-0.059408724308013916, 0.5479384064674377, 0.6842069029808044, 0.4787740707397461,
        -0.07748569548130035, -0.4004858434200287, 0.5603471398353577, 0.6241751909255981,
        0.27930185198783875, -0.363118052482605}},
      {"adam_maximize",
       [](std::vector<Tensor> ps, bool fused) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::Adam>(
             ps, optim::AdamOptions(0.02).weight_decay(0.05).maximize(true).fused(fused));
       },
       {0.0980147332353232, 0.28423869625790965, 0.4222986899037953, 0.3643591237675959, 0.19654461229299858,
        -0.14699504691043158, 0.46501057574391613, 0.35344569694133776, 0.11644794212030192,
        -0.10223650076924182},
       {0.0980147197842598, 0.28423872590065, 0.42229869961738586, 0.3643591105937958, 0.1965446174144745,
        -0.14699505269527435, 0.4650105834007263, 0.3534456789493561, 0.11644794791936874,
        -0.10223650932312012}},
      {"adamw",
       [](std::vector<Tensor> ps, bool fused) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions(0.1).weight_decay(0.1).fused(fused));
       },
       {-0.1885074091334652, 0.7091733579729957, 0.8546275122987363, 0.5754470761042335, -0.26422332412903277,
        -0.5774893548800053, 0.6062796499388347, 0.7991159761830685, 0.4087082974290305, -0.527545158261961},
       {-0.18850740790367126, 0.7091733813285828, 0.8546275496482849, 0.5754470825195312, -0.2642233669757843,
        -0.5774893164634705, 0.6062796711921692, 0.7991159558296204, 0.4087083339691162, -0.527545154094696}},
      {"adamw_amsgrad_low_beta1",
       [](std::vector<Tensor> ps, bool fused) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::AdamW>(
             ps, optim::AdamWOptions(0.1).betas({0.3, 0.9}).weight_decay(0.01).amsgrad(true).fused(fused));
       },
       {-0.028794019149959035, 0.8039041843214472, 0.8222360186124581, 0.4203585827016062,
        -0.31890691338652566, -0.5176196026397933, 0.7356046034508358, 0.7868466283073722, 0.2602560180694932,
        -0.6225036889939535},
       {-0.02879403531551361, 0.8039041757583618, 0.8222359418869019, 0.4203585684299469,
        -0.31890690326690674, -0.5176196098327637, 0.7356046438217163, 0.7868467569351196, 0.2602560520172119,
        -0.6225037574768066}},
      {"sgd",
       [](std::vector<Tensor> ps, bool fused) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::SGD>(ps, optim::SGDOptions(0.1).fused(fused));
       },
       {0.027606952408212114, 0.6289315822513349, 0.7662291614067059, 0.37665195951767305,
        -0.17289210052766069, -0.45903291948937347, 0.7252909464800381, 0.7269530944300906,
        0.2028657810856071, -0.4386510876439074},
       {0.02760695107281208, 0.6289315819740295, 0.7662291526794434, 0.37665197253227234,
        -0.17289210855960846, -0.45903289318084717, 0.7252908945083618, 0.7269531488418579,
        0.20286577939987183, -0.43865108489990234}},
      {"sgd_momentum",
       [](std::vector<Tensor> ps, bool fused) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::SGD>(ps, optim::SGDOptions(0.1).momentum(0.9).fused(fused));
       },
       {-0.21520739156139182, 0.8616761889123266, 1.2201876071046043, 0.5557349333705823, -0.4643878615194839,
        -0.902558586538059, 0.8757333196613967, 1.177843762109977, 0.4614679239974196, -0.6549398972895119},
       {-0.21520736813545227, 0.8616761565208435, 1.2201875448226929, 0.5557349920272827, -0.4643878638744354,
        -0.9025585651397705, 0.8757333159446716, 1.1778438091278076, 0.4614679217338562,
        -0.6549398899078369}},
      {"sgd_dampening_wd",
       [](std::vector<Tensor> ps, bool fused) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::SGD>(
             ps, optim::SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(0.01).fused(fused));
       },
       {-0.08360155990934458, 0.585624442285928, 0.837202866834284, 0.4830292074889368, -0.1484284018634602,
        -0.5435326973858552, 0.6617299159584513, 0.7800491610548672, 0.31345572053038784,
        -0.39186300128332874},
       {-0.08360157161951065, 0.5856244564056396, 0.8372029066085815, 0.48302918672561646,
        -0.14842838048934937, -0.54353266954422, 0.6617298722267151, 0.7800491452217102, 0.3134556710720062,
        -0.39186298847198486}},
      {"sgd_nesterov",
       [](std::vector<Tensor> ps, bool fused) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::SGD>(
             ps, optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.1).fused(fused));
       },
       {-0.19740480770950433, 1.0263766092873048, 1.3254435461457321, 0.44987286446954794,
        -0.6953860605570175, -1.0150465651051135, 1.0048300874217626, 1.317311413628116, 0.4271799034719836,
        -0.8378211936957457},
       {-0.19740481674671173, 1.0263766050338745, 1.3254435062408447, 0.4498728811740875, -0.6953860521316528,
        -1.0150465965270996, 1.0048301219940186, 1.3173112869262695, 0.42717987298965454,
        -0.8378211855888367}},
      {"sgd_maximize",
       [](std::vector<Tensor> ps, bool fused) -> std::unique_ptr<optim::Optimizer> {
         return std::make_unique<optim::SGD>(
             ps, optim::SGDOptions(0.1).momentum(0.5).maximize(true).fused(fused));
       },
       {0.16026005739430904, -0.021367994456136977, 0.043629324902200874, 0.3714145698627455,
        0.544956416709105, 0.19743107654495134, 0.1832812237085037, -0.053141987481327056,
        0.037179296860767465, 0.1911345010334554},
       {0.16026006639003754, -0.021368008106946945, 0.04362931847572327, 0.37141454219818115,
        0.5449564456939697, 0.19743108749389648, 0.18328124284744263, -0.05314201861619949,
        0.03717929497361183, 0.191134512424469}},
  };
  return c;
}

// Not bit for bit: PyTorch's vectorized add(alpha)/addcmul/addcdiv contract the multiply-add into
// an FMA, ember rounds the product first, so elements differ by an ulp or two: float64 within
// 1e-14 relative, float32 within 1e-6.
TEST(OptimReference, MatchesPyTorch) {
  for (const Case& c : cases()) {
    for (bool fused : {false, true}) {
      SCOPED_TRACE(std::string(c.name) + (fused ? " fused" : " per-tensor"));
      EXPECT_CLOSE(run(c.make, kFloat64, fused), tensor(c.f64, kFloat64), Tolerance{1e-14, 1e-15});
      EXPECT_CLOSE(run(c.make, kFloat32, fused), tensor(c.f32, kFloat64).to(kFloat32), Tolerance{1e-6, 1e-7});
    }
  }
}

// The fused kernel does the per-tensor step's operations in the same order and precision, so on
// the CPU the two agree bit for bit in float32 and float64.
TEST(OptimReference, FusedEqualsPerTensorBitwise) {
  for (const Case& c : cases()) {
    for (ScalarType dt : {kFloat32, kFloat64}) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(to_string(dt)));
      EXPECT_CLOSE(run(c.make, dt, true), run(c.make, dt, false), Tolerance{0, 0});
    }
  }
}

}  // namespace
}  // namespace ember::testing
