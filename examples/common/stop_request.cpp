#include "ember/examples/common/stop_request.h"

#include <cstdio>
#include <iterator>

#include <ember/core/factories.h>
#include <ember/distributed/distributed.h>

namespace ember::examples {
namespace {

volatile std::sig_atomic_t g_requested = 0;

extern "C" void on_stop_signal(int) { g_requested = 1; }

constexpr int kSignals[] = {SIGTERM, SIGINT};

}  // namespace

StopRequest::StopRequest() {
  static_assert(std::size(kSignals) == sizeof(previous_) / sizeof(previous_[0]));
  g_requested = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &sa, &previous_[i]);
}

StopRequest::~StopRequest() {
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
}

bool StopRequest::should_stop(int64_t step, const Launch& launch) const {
  if (!launch.distributed()) return g_requested != 0;
  if (step % kCheckEvery != 0) return false;
  Tensor flag = full({1}, g_requested ? 1 : 0, TensorOptions(kInt32).device(launch.device));
  distributed::all_reduce(flag, distributed::ReduceOp::MAX);
  return flag.item<int32_t>() != 0;
}

void report_resume(const std::string& checkpoint, int64_t step, int64_t steps_per_epoch) {
  std::printf("resumed from %s at step %lld (epoch %lld, batch %lld)\n", checkpoint.c_str(), (long long)step,
              (long long)(step / steps_per_epoch + 1), (long long)(step % steps_per_epoch));
}

void report_stop(const std::string& checkpoint, int64_t step) {
  std::printf("stopped by a signal after step %lld: %s written, --resume goes on from there\n",
              (long long)step, checkpoint.c_str());
}

}  // namespace ember::examples
