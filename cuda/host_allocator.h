#pragma once

// Page-locked ("pinned") host memory, cached like PyTorch's CachingHostAllocator: installed as
// core's pinned allocator (Tensor::pin_memory) when the library loads. Blocks are rounded to
// powers of two and reused by size; a block used by asynchronous copies is reused only after
// they have completed. No CUDA types here, so a build without CUDA has these functions too.
namespace ember::cuda {

class Stream;

// Whether `ptr` points into page-locked memory (from this allocator, or pinned by other means);
// copies from or to such memory can run asynchronously.
bool is_pinned(const void* ptr);

// Call after queuing an asynchronous copy from or to the pinned `ptr` (anywhere inside a
// block) on `stream`: when freed, the block is reused only after that work has completed.
// Returns false, recording nothing, when `ptr` is not from this allocator.
bool host_record_event(const void* ptr, const Stream& stream);

// Gives cached pinned blocks that hold no live memory back to CUDA.
void host_empty_cache();

}  // namespace ember::cuda
