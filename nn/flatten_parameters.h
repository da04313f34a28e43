#pragma once

// Contiguous parameter buffers (Megatron-LM's, FSDP's flat parameters): the parameters move into
// one flat buffer per dtype and device, each becoming a view of its slice. Under autocast the
// casts of a buffer's parameters to the compute dtype are then one kernel over the whole buffer
// (core/autocast_mode.h) instead of one per parameter (98 a step for the BERT-style model's linears,
// most of them small).
//
//   model->to(Device(kCUDA));
//   nn::utils::flatten_parameters_(model->parameters());
//
// The parameters stay the same tensors (leaves that require grad, with their hooks and the
// optimizer state kept for them) and keep their values and shapes; only their storage changes.
// Call it after moving the model: `to` gives each parameter a storage of its own again. The
// parameters of one buffer share its version counter, so an in-place change of one counts as a
// change of all (a backward that saved another one then refuses to run, as for any view).

#include <vector>

#include "ember/core/array_ref.h"
#include "ember/core/tensor.h"

namespace ember::nn::utils {

// Returns the buffers (1-D, contiguous), in order of each dtype and device's first parameter.
std::vector<Tensor> flatten_parameters_(ArrayRef<Tensor> parameters);

}  // namespace ember::nn::utils
