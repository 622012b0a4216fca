// The on-disk snapshot format: a header, a manifest of the tensors and their
// bytes, every part checksummed. Pure functions over bytes, so the parser of
// this untrusted input is fuzzed and unit-tested without a registry.
//
// Layout (integers little-endian):
//   header   40 bytes: magic "TNSDSNAP", u32 format version (3), u32 entry
//            count, u64 manifest bytes, u64 next version (the registry's
//            last issued version + 1 when written), u32 CRC-32C of the
//            manifest, u32 CRC-32C of the 36 header bytes before it
//   manifest one record per tensor (see snapshot_format.cc), starting at 40
//   data     each tensor's stored bytes at its record's data_offset (64-byte
//            aligned, in record order); the file ends with the last byte
//   Each record carries the CRC-32C of its tensor's bytes.
#ifndef TENSORD_SERVICE_SNAPSHOT_SNAPSHOT_FORMAT_H_
#define TENSORD_SERVICE_SNAPSHOT_SNAPSHOT_FORMAT_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "service/dlpack/tensor_layout.h"
#include "service/registry/tensor_version.h"

namespace tensord {

// Versions 1 (a 32-byte header without the next version) and 2 (records
// without the origin) are not read: they never left development.
inline constexpr uint32_t kSnapshotFormatVersion = 3;
inline constexpr size_t kSnapshotHeaderBytes = 40;
inline constexpr uint64_t kSnapshotDataAlignment = 64;

// One tensor of a snapshot.
struct SnapshotEntry {
  std::string name;
  uint64_t version = 0;
  int64_t created_unix_nanos = 0;
  Retention retention = Retention::kDefault;
  dlpack::TensorLayout layout;
  // Where the bytes are in the file, how many, and their CRC-32C.
  uint64_t data_offset = 0;
  uint64_t total_bytes = 0;
  uint32_t crc32c = 0;
  // In a cluster: the version's order among the name's (its name record's
  // origin), so a restart recognises whether it is still the latest.
  int64_t origin = 0;
};

// What a snapshot holds besides the tensors' bytes.
struct SnapshotContents {
  // The registry's next version when the snapshot was written: a restore
  // numbers on from here, so versions issued before the snapshot (of cache,
  // deleted or replaced tensors too) are never issued again.
  uint64_t next_version = 1;
  std::vector<SnapshotEntry> entries;
};

// Header and manifest of a snapshot whose tensors are `entries`, in that
// order. Fills each entry's data_offset; the caller writes the returned
// bytes, then each tensor's bytes at its data_offset (zero padding between).
// `next_version` must exceed every entry's version.
std::string EncodeSnapshotPrefix(std::span<SnapshotEntry> entries, uint64_t next_version);

// The file size EncodeSnapshotPrefix's layout implies.
uint64_t SnapshotFileBytes(std::span<const SnapshotEntry> entries, uint64_t prefix_bytes);

// Checks the header, both checksums, every record (name rules, durable
// retention, a layout that needs exactly total_bytes, unique names, data in
// order inside the file, versions below the next version) and that the file
// ends exactly at the last tensor's bytes, so a truncated or extended file is
// refused. DATA_LOSS names what is wrong and where. Does not read tensor
// bytes (see VerifySnapshotEntry).
absl::StatusOr<SnapshotContents> ParseSnapshot(absl::string_view file);

// DATA_LOSS naming the tensor when its bytes in `file` do not match the
// record's CRC-32C. `entry` came from ParseSnapshot(file).
absl::Status VerifySnapshotEntry(absl::string_view file, const SnapshotEntry& entry);

}  // namespace tensord

#endif  // TENSORD_SERVICE_SNAPSHOT_SNAPSHOT_FORMAT_H_
