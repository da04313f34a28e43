#pragma once

namespace ember {

// Whether ops record the graph (thread-local, on by default), as torch.is_grad_enabled().
struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Scoped switches, as torch.no_grad() / torch.enable_grad().
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// torch.inference_mode() / c10::InferenceMode: here the same as NoGradGuard (ember has no
// inference tensors; under either, nothing is recorded).
class InferenceMode : public NoGradGuard {};

class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(true); }
  ~EnableGradGuard() { GradMode::set_enabled(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace ember
