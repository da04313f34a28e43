#include "ember/examples/common/epoch_meter.h"

#include <algorithm>
#include <cstdio>

#include <ember/distributed/distributed.h>

namespace ember::examples {

EpochMeter::EpochMeter(int64_t epoch, int64_t epochs, int64_t steps, int64_t batch_size, const char* unit,
                       const Launch& launch)
    : launch_(launch),
      steps_(steps),
      batch_size_(batch_size),
      unit_(unit),
      bar_(detail::str_cat("epoch ", epoch + 1, "/", epochs), steps, launch.is_main()),
      loss_sum_(zeros({}, TensorOptions(kFloat32).device(launch.device))) {}

void EpochMeter::add(const Tensor& loss) {
  {
    NoGradGuard no_grad;
    loss_sum_.add_(loss.detach().to(kFloat32));
  }
  ++done_;
  if (done_ % kReportEvery != 0 && done_ != steps_) return;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char stats[96];
  std::snprintf(stats, sizeof stats, "loss %.4f %7.0f %s/s", loss_sum_.item<float>() / done_,
                done_ * batch_size_ * launch_.world_size / secs, unit_);
  bar_.update(done_, stats);
}

EpochMeter::Summary EpochMeter::finish() {
  bar_.finish();
  Tensor mean = loss_sum_ / static_cast<double>(std::max<int64_t>(done_, 1));
  if (launch_.distributed()) {
    distributed::all_reduce(mean);
    mean.div_(static_cast<double>(launch_.world_size));
  }
  const double train_loss = mean.item<float>();
  return {train_loss, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(),
          done_};
}

}  // namespace ember::examples
