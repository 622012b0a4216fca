// libFuzzer target: ParseSnapshot (and VerifySnapshotEntry) on arbitrary
// bytes. Beyond "no crash", it checks the promises of an accepted snapshot:
// records in file order, inside the file, the file ending at the last byte,
// each size what its layout needs; and that re-encoding the records
// parses back to the same records.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "service/dlpack/tensor_layout.h"
#include "service/snapshot/snapshot_format.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tensord;
  const absl::string_view file(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<SnapshotEntry>> entries = ParseSnapshot(file);
  if (!entries.ok()) return 0;

  uint64_t previous_end = kSnapshotHeaderBytes;
  for (const SnapshotEntry& entry : *entries) {
    Check(entry.data_offset >= previous_end && entry.total_bytes <= size - entry.data_offset);
    absl::StatusOr<uint64_t> required = dlpack::RequiredBytes(entry.layout);
    Check(required.ok() && *required == entry.total_bytes);
    Check(IsDurable(entry.retention) && entry.version != 0);
    (void)VerifySnapshotEntry(file, entry);
    previous_end = entry.data_offset + entry.total_bytes;
  }
  Check(previous_end == size || entries->empty());

  // Re-encode the accepted records with their bytes: it must parse back.
  std::vector<SnapshotEntry> copies = *entries;
  std::string rebuilt = EncodeSnapshotPrefix(copies);
  for (size_t i = 0; i < copies.size(); ++i) {
    rebuilt.resize(copies[i].data_offset, '\0');
    rebuilt.append(file.data() + (*entries)[i].data_offset, (*entries)[i].total_bytes);
  }
  absl::StatusOr<std::vector<SnapshotEntry>> reparsed =
      ParseSnapshot(absl::string_view(rebuilt.data(), rebuilt.size()));
  Check(reparsed.ok() && reparsed->size() == entries->size());
  for (size_t i = 0; i < copies.size(); ++i) {
    const SnapshotEntry& a = (*entries)[i];
    const SnapshotEntry& b = (*reparsed)[i];
    Check(a.name == b.name && a.version == b.version && a.layout == b.layout &&
          a.crc32c == b.crc32c && a.total_bytes == b.total_bytes &&
          a.created_unix_nanos == b.created_unix_nanos && a.retention == b.retention);
  }
  return 0;
}
