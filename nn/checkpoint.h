#pragma once

// checkpoint_sequential, as torch.utils.checkpoint.checkpoint_sequential(functions, segments,
// input, use_reentrant=False). It lives in nn (not beside autograd::checkpoint) because it runs
// an nn::Sequential.

#include "ember/autograd/checkpoint.h"
#include "ember/nn/container.h"

namespace ember::nn {

// Runs `sequential` on `input` in `segments` runs of size() / segments modules each: every run
// but the last is checkpointed (autograd::checkpoint); the last one, which also takes the
// remaining modules, runs normally, since backward needs its activations first.
Tensor checkpoint_sequential(const Sequential& sequential, int64_t segments, const Tensor& input,
                             autograd::CheckpointOptions options = {});

}  // namespace ember::nn
