#pragma once

// What the golden checks share: relative errors in float64 on the CPU, PASS/FAIL lines, and the
// reference model's weights out of a golden file.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <ember/ember.h>

namespace ember::golden_compare {

inline Tensor f64(const Tensor& t) { return t.to(Device(kCPU)).to(kFloat64); }

// ||got - want|| / ||want||.
inline double rel_error(const Tensor& got, const Tensor& want) {
  Tensor w = f64(want);
  return (f64(got) - w).norm().item<double>() / std::max(w.norm().item<double>(), 1e-300);
}

// Prints "PASS name rel=... tol=...extra" (or FAIL) and says whether it passed; NaN fails.
inline bool report(const std::string& name, double rel, double tol, const std::string& extra = "") {
  const bool ok = std::isfinite(rel) && rel <= tol;
  std::printf("%s %s rel=%.2e tol=%.0e%s\n", ok ? "PASS" : "FAIL", name.c_str(), rel, tol, extra.c_str());
  return ok;
}

// The tensors stored under "model.<name>", by <name>.
inline OrderedDict<Tensor> model_weights(const StateDict& golden) {
  OrderedDict<Tensor> weights;
  for (const auto& [key, t] : golden.tensors)
    if (key.rfind("model.", 0) == 0) weights.insert(key.substr(6), t);
  return weights;
}

}  // namespace ember::golden_compare
