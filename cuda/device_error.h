#pragma once

#include <cstdint>

// Errors found by CUDA kernels, raised on the host without a synchronization of their own.
//
// An index check that reads the indices back stalls the host until the GPU catches up, every
// step. Instead the kernels that index (gather, scatter, index_select, index_add, embedding, the
// losses' targets) check each index as they read it: a bad one is skipped (its output is 0, it
// writes nothing) and recorded here. The record is read at the next point that waits for the GPU
// anyway (a copy to the host, item(), Stream/Event/device synchronize) and raised there as an
// ember::Error naming the op and the index. Unlike PyTorch's device-side assert, the CUDA context
// stays usable.
namespace ember::cuda {

// What a kernel found. Lives in mapped pinned host memory: kernels write it through the bus (only
// on an error), the host reads it after a synchronization without a copy.
struct DeviceIndexError {
  enum Kind : int32_t { Index, EmbeddingRow, ClassTarget };
  int32_t flag;  // 0 until the first error; later errors keep the first one's record
  int32_t op;    // device_error_op()'s id of the op's name
  int32_t kind;
  int32_t dim;
  int64_t index, size;
};

// The record kernels write to (a device-usable pointer), created on first use.
DeviceIndexError* device_index_error();
// A small id for an op's name (a string literal or other static string) that kernels record.
int32_t device_error_op(const char* op);
// After a synchronization: throws the error a kernel recorded, if any, and clears it.
void raise_device_errors();

}  // namespace ember::cuda
