// put NAME FILE.npy: publishes a .npy file as a new version of NAME.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/tensorctl/commands.h"
#include "client/tensorctl/file_tensor.h"
#include "client/tensorctl/progress_bar.h"
#include "client/tensorctl/tensor_text.h"
#include "service/common/byte_size.h"
#include "service/common/mapped_file.h"
#include "service/common/status_macros.h"
#include "service/formats/npy.h"

namespace tensord::tensorctl {

absl::Status RunPut(Client& client, const Invocation& invocation) {
  const std::string& name = invocation.arguments[0];
  const std::string& path = invocation.arguments[1];
  // Mapped, not read: the bytes go from the page cache to the wire, and a
  // file larger than memory still works.
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  absl::StatusOr<formats::NpyHeader> header = formats::ParseNpyHeader(file->bytes());
  if (!header.ok()) return WithContext(header.status(), path);
  // A Fortran-order header carries column-major strides; Put packs them.
  absl::StatusOr<DLTensor> tensor = FileTensor(
      file->bytes(), header->data_offset, header->data_offset + header->data_bytes, header->layout);
  if (!tensor.ok()) return WithContext(tensor.status(), path);

  if (invocation.Has(kCacheOption) && invocation.Has(kPinOption)) {
    return absl::InvalidArgumentError("--cache and --pin exclude each other");
  }
  ProgressBar progress(absl::StrCat("put ", name));
  PutOptions options;
  if (invocation.Has(kCacheOption)) options.retention = Retention::kCache;
  if (invocation.Has(kPinOption)) options.retention = Retention::kPinned;
  if (invocation.Has(kDeviceOption)) {
    TENSORD_ASSIGN_OR_RETURN(DLDevice device, ParseDevice(invocation.Text(kDeviceOption)));
    if (device.device_type != kDLCPU) options.device = device;
  }
  if (invocation.Has(kReplicasOption)) {
    const uint64_t replicas = invocation.Number(kReplicasOption);
    if (replicas < 1 || replicas > 16) {
      return absl::InvalidArgumentError(absl::StrCat("--replicas ", replicas, " must be 1..16"));
    }
    options.replicas = static_cast<uint32_t>(replicas);
  }
  TENSORD_ASSIGN_OR_RETURN(options.streams, StreamsOption(invocation));
  options.send_crc32c = true;
  options.progress = progress.Callback();
  TENSORD_ASSIGN_OR_RETURN(TensorInfo info, client.Put(name, *tensor, options));
  progress.Finish();
  absl::PrintF("put %s version %d: %s %s on %s\n", name, info.version, DescribeTensor(info),
               FormatByteSize(info.total_bytes), FormatDevice(info.device));
  return absl::OkStatus();
}

}  // namespace tensord::tensorctl
