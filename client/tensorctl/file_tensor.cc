#include "client/tensorctl/file_tensor.h"

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"

namespace tensord::tensorctl {

absl::StatusOr<DLTensor> FileTensor(std::string_view file, uint64_t begin, uint64_t end,
                                    const dlpack::TensorLayout& layout) {
  if (begin > end || end > file.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "byte range [", begin, ", ", end, ") is outside the file of ", file.size(), " bytes"));
  }
  // The parsers check this already; repeating it here keeps a parser bug
  // from turning into a read past the mapping.
  TENSORD_RETURN_IF_ERROR(dlpack::ValidateLayoutFits(layout, end - begin));
  DLTensor tensor{};
  tensor.data = const_cast<char*>(file.data() + begin);
  tensor.device = layout.device;
  tensor.ndim = static_cast<int32_t>(layout.shape.size());
  tensor.dtype = layout.dtype;
  tensor.shape = const_cast<int64_t*>(layout.shape.data());
  tensor.strides = layout.strides.empty() ? nullptr : const_cast<int64_t*>(layout.strides.data());
  tensor.byte_offset = layout.byte_offset;
  return tensor;
}

}  // namespace tensord::tensorctl
