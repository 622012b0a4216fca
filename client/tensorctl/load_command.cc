// load FILE.safetensors: publishes every tensor of a .safetensors file.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/tensorctl/commands.h"
#include "client/tensorctl/file_tensor.h"
#include "client/tensorctl/progress_bar.h"
#include "client/tensorctl/tensor_text.h"
#include "service/common/byte_size.h"
#include "service/common/mapped_file.h"
#include "service/common/status_macros.h"
#include "service/formats/safetensors.h"

namespace tensord::tensorctl {

absl::Status RunLoad(Client& client, const Invocation& invocation) {
  const std::string& path = invocation.arguments[0];
  const std::string prefix = invocation.Text(kPrefixOption);
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  // The whole header is checked before the first put, so a malformed file
  // publishes nothing.
  absl::StatusOr<formats::SafetensorsIndex> index = formats::ParseSafetensors(file->bytes());
  if (!index.ok()) return WithContext(index.status(), path);
  uint64_t total_bytes = 0;
  for (const formats::SafetensorsEntry& entry : index->entries) {
    total_bytes += entry.end - entry.begin;
  }

  // One bar for the whole file: a model is many tensors, and the user waits
  // for all of them.
  ProgressBar progress(absl::StrCat("load ", path));
  const absl::Time start = absl::Now();
  uint64_t loaded_bytes = 0;
  size_t loaded = 0;
  for (const formats::SafetensorsEntry& entry : index->entries) {
    const std::string name = prefix + entry.name;
    absl::StatusOr<DLTensor> tensor =
        FileTensor(file->bytes(), entry.begin, entry.end, entry.layout);
    if (!tensor.ok()) return WithContext(tensor.status(), absl::StrCat(path, ": ", entry.name));
    PutOptions options;
    options.send_crc32c = true;
    options.progress = [&progress, loaded_bytes, total_bytes](uint64_t done, uint64_t) {
      progress.Update(loaded_bytes + done, total_bytes);
    };
    absl::StatusOr<TensorInfo> info = client.Put(name, *tensor, options);
    if (!info.ok()) {
      // Earlier tensors stay published; say how far it got.
      return WithContext(info.status(),
                         absl::StrCat("put ", name, " (", loaded, " of ", index->entries.size(),
                                      " tensors were loaded before it)"));
    }
    loaded_bytes += entry.end - entry.begin;
    ++loaded;
    progress.Update(loaded_bytes, total_bytes);
  }
  progress.Finish();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  absl::PrintF("load %s: %d %s, %s in %.2f s (%s)\n", path, loaded,
               loaded == 1 ? "tensor" : "tensors", FormatByteSize(loaded_bytes), seconds,
               FormatThroughput(loaded_bytes, seconds));
  return absl::OkStatus();
}

}  // namespace tensord::tensorctl
