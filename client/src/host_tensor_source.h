// A caller's host tensor as the client checks and sends it.
#ifndef TENSORD_CLIENT_SRC_HOST_TENSOR_SOURCE_H_
#define TENSORD_CLIENT_SRC_HOST_TENSOR_SOURCE_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/src/heap_tensor_memory.h"
#include "service/dlpack/tensor_layout.h"
#include "tensord/dlpack.h"

namespace tensord {

// A host tensor whose layout is sound: known dtype, sane shape and strides,
// data present when there are elements. `what` names it in errors.
absl::Status ValidateHostTensor(const DLTensor& tensor, absl::string_view what);

// The compact bytes of a caller's tensor: its own memory when already
// compact, a packed copy otherwise.
struct CompactSource {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  dlpack::TensorLayout layout;  // compact, byte_offset 0
  std::shared_ptr<HeapTensorMemory> packed;
};

// `tensor` has passed ValidateHostTensor.
absl::StatusOr<CompactSource> CompactSourceOf(const DLTensor& tensor);

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_HOST_TENSOR_SOURCE_H_
