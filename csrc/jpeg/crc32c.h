// CRC-32C (Castagnoli, iSCSI's and ext4's), the checksum of fastprep's packed shards. Chosen over
// zlib's CRC-32 because x86-64-v2 and later compute it in hardware (the SSE4.2 crc32 instruction,
// ~8 bytes a cycle over three independent streams): a window read checks every byte it uses in a
// few microseconds, where zlib's crc32 runs at ~1 GB/s. The baseline x86-64 level and other CPUs
// use a slicing-by-8 table (same values). Torch-free; the ISA level follows FASTPREP_ISA.
#pragma once
#include <cstddef>
#include <cstdint>

namespace fastprep::jpeg {

// The CRC-32C of data[0:size) (initial value and final xor 0xFFFFFFFF, as every CRC-32C user:
// crc32c(b"123456789") == 0xE3069283).
uint32_t crc32c(const uint8_t* data, size_t size);

// The CRC-32C of each of n byte ranges, into out[0:n). Ranges are independent, so three are run
// side by side (the crc32 instruction's latency is three times its throughput).
void crc32c_many(const uint8_t* const* data, const size_t* size, uint32_t* out, size_t n);

}  // namespace fastprep::jpeg
