// libFuzzer target: ParseSnapshot (and VerifySnapshotEntry) on arbitrary
// bytes. Beyond "no crash", it checks the promises of an accepted snapshot:
// records in file order, inside the file, the file ending at the last byte,
// each size what its layout needs, each version below the next version; and
// that re-encoding the records parses back to the same records. Each input
// is also tried with its two checksums repaired, so mutations reach the
// record decoder instead of stopping at a checksum mismatch.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "service/common/crc32c.h"
#include "service/dlpack/tensor_layout.h"
#include "service/snapshot/snapshot_format.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

void StoreLittleEndian32(uint32_t value, char* at) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<char>(value >> (8 * i));
}

// `file` with the manifest and header CRC-32Cs rewritten to match, when the
// header's manifest size fits; unchanged otherwise.
std::string RepairChecksums(absl::string_view file) {
  std::string repaired(file.data(), file.size());
  if (repaired.size() < tensord::kSnapshotHeaderBytes) return repaired;
  uint64_t manifest_bytes = 0;
  for (int i = 7; i >= 0; --i)
    manifest_bytes = manifest_bytes << 8 | static_cast<uint8_t>(repaired[16 + i]);
  if (manifest_bytes > repaired.size() - tensord::kSnapshotHeaderBytes) return repaired;
  // The header ends with the manifest's CRC-32C, then its own.
  constexpr size_t kManifestCrcAt = tensord::kSnapshotHeaderBytes - 8;
  constexpr size_t kHeaderCrcAt = tensord::kSnapshotHeaderBytes - 4;
  StoreLittleEndian32(
      tensord::Crc32c(repaired.data() + tensord::kSnapshotHeaderBytes, manifest_bytes),
      &repaired[kManifestCrcAt]);
  StoreLittleEndian32(tensord::Crc32c(repaired.data(), kHeaderCrcAt), &repaired[kHeaderCrcAt]);
  return repaired;
}

void CheckOne(absl::string_view file) {
  using namespace tensord;
  const size_t size = file.size();
  absl::StatusOr<SnapshotContents> contents = ParseSnapshot(file);
  if (!contents.ok()) return;
  const std::vector<SnapshotEntry>* entries = &contents->entries;

  uint64_t previous_end = kSnapshotHeaderBytes;
  for (const SnapshotEntry& entry : *entries) {
    Check(entry.data_offset >= previous_end && entry.total_bytes <= size - entry.data_offset);
    absl::StatusOr<uint64_t> required = dlpack::RequiredBytes(entry.layout);
    Check(required.ok() && *required == entry.total_bytes);
    Check(IsDurable(entry.retention) && entry.version != 0 &&
          entry.version < contents->next_version);
    (void)VerifySnapshotEntry(file, entry);
    previous_end = entry.data_offset + entry.total_bytes;
  }
  Check(previous_end == size || entries->empty());

  // Re-encode the accepted records with their bytes: it must parse back.
  std::vector<SnapshotEntry> copies = *entries;
  std::string rebuilt = EncodeSnapshotPrefix(copies, contents->next_version);
  for (size_t i = 0; i < copies.size(); ++i) {
    rebuilt.resize(copies[i].data_offset, '\0');
    rebuilt.append(file.data() + (*entries)[i].data_offset, (*entries)[i].total_bytes);
  }
  absl::StatusOr<SnapshotContents> reparsed =
      ParseSnapshot(absl::string_view(rebuilt.data(), rebuilt.size()));
  Check(reparsed.ok() && reparsed->entries.size() == entries->size() &&
        reparsed->next_version == contents->next_version);
  for (size_t i = 0; i < copies.size(); ++i) {
    const SnapshotEntry& a = (*entries)[i];
    const SnapshotEntry& b = reparsed->entries[i];
    Check(a.name == b.name && a.version == b.version && a.layout == b.layout &&
          a.crc32c == b.crc32c && a.total_bytes == b.total_bytes &&
          a.created_unix_nanos == b.created_unix_nanos && a.retention == b.retention);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view file(reinterpret_cast<const char*>(data), size);
  CheckOne(file);
  const std::string repaired = RepairChecksums(file);
  CheckOne(absl::string_view(repaired.data(), repaired.size()));
  return 0;
}
