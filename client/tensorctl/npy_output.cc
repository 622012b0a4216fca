#include "client/tensorctl/npy_output.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "client/tensorctl/tensor_text.h"
#include "service/common/absl_view.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"
#include "service/dlpack/strided_copy.h"
#include "service/dlpack/tensor_layout.h"
#include "service/formats/npy.h"

namespace tensord::tensorctl {

absl::StatusOr<std::string> NpyHeaderFor(std::string_view name, const TensorInfo& info) {
  absl::StatusOr<std::string> header = formats::EncodeNpyHeader(info.dtype, info.shape);
  if (header.ok()) return header;
  return absl::InvalidArgumentError(
      absl::StrCat(AsAbsl(name), " is ", DescribeTensor(info), ", which .npy cannot hold (",
                   header.status().message(), "); use 'tensorctl get-raw ", AsAbsl(name),
                   " -o FILE' for its raw bytes"));
}

absl::Status WriteCompact(const Tensor& tensor, OutputFile& output) {
  const DLTensor& dl = tensor.dl_tensor();
  if (dl.device.device_type != kDLCPU && dl.device.device_type != kDLCUDAHost) {
    return absl::FailedPreconditionError(absl::StrCat(
        "fetched tensor is on device ", FormatDevice(dl.device), "; tensorctl writes host memory"));
  }
  const TensorInfo& info = tensor.info();
  // Address the elements from the start of the stored bytes, so that negative
  // strides reaching before element [0, ..., 0] stay within the buffer.
  TENSORD_ASSIGN_OR_RETURN(dlpack::TensorLayout stored, dlpack::LayoutOf(dl));
  stored.byte_offset = info.byte_offset;
  const char* stored_base = static_cast<const char*>(dl.data) - info.byte_offset;
  TENSORD_RETURN_IF_ERROR(
      dlpack::ValidateLayoutFits(stored, info.byte_offset + tensor.data_bytes()));
  TENSORD_ASSIGN_OR_RETURN(uint64_t compact_bytes,
                           dlpack::CompactByteSize(stored.dtype, stored.shape));
  if (dlpack::IsCompact(stored)) {
    return output.Write(std::string_view(static_cast<const char*>(dl.data), compact_bytes));
  }
  dlpack::TensorLayout compact{stored.dtype, stored.shape, {}, 0, stored.device};
  std::vector<char> buffer(compact_bytes);
  TENSORD_RETURN_IF_ERROR(dlpack::CopyStrided(stored_base, stored, buffer.data(), compact));
  return output.Write(std::string_view(buffer.data(), buffer.size()));
}

}  // namespace tensord::tensorctl
