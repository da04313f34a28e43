#pragma once

// SIGTERM or SIGINT as a request to stop at the next step boundary: a cluster scheduler's
// preemption, emberrun forwarding its own SIGTERM, Ctrl-C. A trainer then writes its checkpoint
// (mid-epoch, with the data loader's position) and exits 0, and --resume goes on from that step
// bit for bit. The handlers are installed for the object's lifetime and only set a flag.
#include <csignal>
#include <cstdint>
#include <string>

#include "ember/examples/common/launch.h"

namespace ember::examples {

class StopRequest {
 public:
  StopRequest();
  ~StopRequest();  // restores the previous handlers
  StopRequest(const StopRequest&) = delete;
  StopRequest& operator=(const StopRequest&) = delete;

  // Whether the job stops after step `step` (counted from 1). One process: as soon as a signal
  // came. Several: every kCheckEvery steps the ranks OR their flags in an all-reduce (each rank may
  // see its signal at a different step, and a rank that stopped alone would leave the others
  // waiting in a collective), so call it at every step on every rank.
  bool should_stop(int64_t step, const Launch& launch) const;

  static constexpr int64_t kCheckEvery = 20;  // EpochMeter's report interval: a read-back anyway

 private:
  struct sigaction previous_[2];  // SIGTERM's and SIGINT's
};

// What rank 0 prints: where a resumed run starts (a checkpoint holds the steps done, so a stop
// leaves it mid-epoch), and that a stop request wrote the checkpoint.
void report_resume(const std::string& checkpoint, int64_t step, int64_t steps_per_epoch);
void report_stop(const std::string& checkpoint, int64_t step);

}  // namespace ember::examples
