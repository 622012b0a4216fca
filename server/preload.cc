#include "server/preload.h"

#include <cstring>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "service/common/crc32c.h"
#include "service/common/log.h"
#include "service/common/mapped_file.h"
#include "service/common/status_macros.h"
#include "service/common/tensor_name.h"
#include "service/formats/safetensors.h"

namespace tensord {
namespace {

// Whether `name`'s latest version already holds `entry` (same layout, size
// and CRC-32C) and is durable: typically restored from a snapshot, which
// holds preloaded tensors because they are pinned. Publishing it again would
// need room for both copies at once. The file's bytes are summed only when
// layout and size already match.
bool IsUnchanged(const Registry& registry, const std::string& name,
                 const formats::SafetensorsEntry& entry, std::string_view file) {
  absl::StatusOr<VersionInfo> current = registry.Stat(name, 0);
  const uint64_t bytes = entry.end - entry.begin;
  if (!current.ok() || !IsDurable(current->retention) || current->total_bytes != bytes ||
      !(current->layout == entry.layout)) {
    return false;
  }
  return Crc32c(file.data() + entry.begin, bytes) == current->crc32c;
}

}  // namespace

absl::StatusOr<uint64_t> PreloadSafetensors(Registry& registry, const std::string& path,
                                            const std::string& prefix) {
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  TENSORD_ASSIGN_OR_RETURN(formats::SafetensorsIndex index,
                           formats::ParseSafetensors(file->bytes()));
  for (const formats::SafetensorsEntry& entry : index.entries) {
    TENSORD_RETURN_IF_ERROR(ValidateTensorName(prefix + entry.name));
  }
  uint64_t published = 0, skipped = 0;
  for (const formats::SafetensorsEntry& entry : index.entries) {
    const std::string name = prefix + entry.name;
    if (IsUnchanged(registry, name, entry, file->bytes())) {
      Log(LogLevel::kInfo, "preload_skipped", {{"name", name}, {"reason", "unchanged"}});
      ++skipped;
      continue;
    }
    TENSORD_ASSIGN_OR_RETURN(
        PendingVersion pending,
        registry.Prepare(name, entry.layout, entry.end - entry.begin, Retention::kPinned));
    if (pending.total_bytes > 0) {
      TENSORD_RETURN_IF_ERROR(
          pending.buffer->Write(0, file->bytes().data() + entry.begin, pending.total_bytes));
    }
    TENSORD_ASSIGN_OR_RETURN(VersionInfo info, registry.Publish(std::move(pending)));
    Log(LogLevel::kDebug, "preload_tensor", {{"name", info.name}, {"bytes", info.total_bytes}});
    ++published;
  }
  Log(LogLevel::kInfo, "preload", {{"file", path}, {"tensors", published}, {"unchanged", skipped}});
  return published;
}

}  // namespace tensord
