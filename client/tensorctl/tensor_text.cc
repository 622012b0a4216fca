#include "client/tensorctl/tensor_text.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "service/common/byte_size.h"
#include "service/dlpack/data_type.h"

namespace tensord::tensorctl {

std::string FormatShape(std::span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

std::string DescribeTensor(const TensorInfo& info) {
  return absl::StrCat(dlpack::DataTypeName(info.dtype), FormatShape(info.shape));
}

std::string FormatDevice(DLDevice device) {
  switch (device.device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return absl::StrCat("cuda:", device.device_id);
    case kDLCUDAHost: return "cuda_host";
    case kDLCUDAManaged: return absl::StrCat("cuda_managed:", device.device_id);
    default:
      return absl::StrCat("device_type", static_cast<int>(device.device_type), ":",
                          device.device_id);
  }
}

absl::StatusOr<DLDevice> ParseDevice(absl::string_view text) {
  if (text == "cpu") return DLDevice{kDLCPU, 0};
  absl::string_view id_text = text;
  int32_t id = 0;
  if (absl::ConsumePrefix(&id_text, "cuda:") && absl::SimpleAtoi(id_text, &id) && id >= 0) {
    return DLDevice{kDLCUDA, id};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--device '", text, "' is not cpu or cuda:N (N a device number)"));
}

std::string FormatThroughput(uint64_t bytes, double seconds) {
  if (seconds <= 0) return "-";
  return absl::StrCat(FormatByteSize(static_cast<uint64_t>(static_cast<double>(bytes) / seconds)),
                      "/s");
}

}  // namespace tensord::tensorctl
