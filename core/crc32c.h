#pragma once

#include <cstddef>
#include <cstdint>

namespace ember {

// CRC-32C (Castagnoli), as iSCSI, ext4 and gRPC use it: the checksum serialize.h stores per
// tensor. Pass the previous result as `crc` to continue over more bytes.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

}  // namespace ember
