#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ember/core/ordered_dict.h"
#include "ember/core/state_dict.h"
#include "ember/core/tensor.h"

namespace ember {

// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors), readable
// and writable by its Python package: an 8-byte little-endian header length, a JSON header
//   {"__metadata__": {str: str}, name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}}
// padded with spaces to 8 bytes, then the raw little-endian data. Dtypes: F64 F32 F16 BF16 I64
// I32 U8 BOOL.
//
// Integrity: save() adds a CRC-32C of each tensor's bytes to the metadata as
// "ember.data.crc32c.<name>", and one of the header itself (its bytes, with these 8 digits as
// zeros) as "ember.header.crc32c" (8 hex digits each). load() verifies every one it finds and
// does not return them, so any changed byte of a saved file is an error. Files without them
// (written by Python) load as they are.

// Writes atomically: a temporary file in the same directory is written, flushed and fsync'ed,
// then renamed over `path` and the directory fsync'ed; if anything fails, `path` is untouched.
// Tensors may be non-contiguous or on any device; they are written as contiguous CPU data.
void save(const OrderedDict<Tensor>& tensors, const std::string& path,
          const std::map<std::string, std::string>& metadata = {});
void save(const StateDict& state, const std::string& path);
// The same bytes save() writes, in memory.
std::vector<uint8_t> save_to_buffer(const OrderedDict<Tensor>& tensors,
                                    const std::map<std::string, std::string>& metadata = {});

// Reads CPU tensors in the header's order, and the metadata. Safe on hostile input: every bound
// is checked, and each error names the tensor or header field and what is wrong with it.
StateDict load(const std::string& path);
StateDict load_from_buffer(const uint8_t* data, size_t size);

}  // namespace ember
