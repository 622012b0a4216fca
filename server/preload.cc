#include "server/preload.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "service/common/log.h"
#include "service/common/mapped_file.h"
#include "service/common/status_macros.h"
#include "service/formats/safetensors.h"
#include "service/registry/tensor_name.h"

namespace tensord {

absl::StatusOr<uint64_t> PreloadSafetensors(Registry& registry, const std::string& path,
                                            const std::string& prefix) {
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  TENSORD_ASSIGN_OR_RETURN(formats::SafetensorsIndex index, formats::ParseSafetensors(file->bytes()));
  for (const formats::SafetensorsEntry& entry : index.entries) {
    TENSORD_RETURN_IF_ERROR(ValidateTensorName(prefix + entry.name));
  }
  uint64_t published = 0;
  for (const formats::SafetensorsEntry& entry : index.entries) {
    TENSORD_ASSIGN_OR_RETURN(PendingVersion pending,
                             registry.Prepare(prefix + entry.name, entry.layout,
                                              entry.end - entry.begin, Retention::kPinned));
    if (pending.total_bytes > 0) {
      std::memcpy(pending.buffer->mutable_data(), file->bytes().data() + entry.begin,
                  pending.total_bytes);
    }
    TENSORD_ASSIGN_OR_RETURN(VersionInfo info, registry.Publish(std::move(pending)));
    Log(LogLevel::kDebug, "preload_tensor", {{"name", info.name}, {"bytes", info.total_bytes}});
    ++published;
  }
  Log(LogLevel::kInfo, "preload", {{"file", path}, {"tensors", published}});
  return published;
}

}  // namespace tensord
