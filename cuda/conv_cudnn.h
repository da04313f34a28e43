#pragma once

// Convolutions on CUDA through cuDNN: the kernels of conv2d_stub, conv_transpose2d_stub and
// conv2d_weight_stub, for NCHW and channels-last (NHWC) tensors.

namespace ember::cuda::cudnn {

// Whether float32 convolutions may run on TF32 tensor cores, as torch.backends.cudnn.allow_tf32.
// Off by default (PyTorch's default is on): float32 results then match the CPU closely.
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace ember::cuda::cudnn
