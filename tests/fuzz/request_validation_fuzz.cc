// libFuzzer target: ValidatePutHeader and ResolveFetchRange, the checks every
// Put header and Fetch request pass before a byte moves.
//
// Input: [mode byte] [8 bytes little-endian: a limit] [serialized message...]
// Mode bit 0 clear: the message is a PutHeader and the limit is
// max_tensor_bytes (shifted right by mode >> 1 so small limits are common);
// set: a FetchRequest and the limit is the tensor's total_bytes (same shift).
//
// Beyond "no crash": an accepted header is consistent with what the layout
// needs (and its part, if any, lies inside it) and survives the proto round trip a Fetch makes
// (strides filled in); a rejection uses the codes the header promises; an accepted range lies
// inside the tensor.
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "google/protobuf/stubs/logging.h"
#include "service/common/tensor_name.h"
#include "service/dlpack/data_type.h"
#include "service/dlpack/tensor_layout.h"
#include "service/transport/request_validation.h"
#include "service/wire/layout_conversion.h"
#include "tensord/v1/tensor_service.pb.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

void FuzzPutHeader(const uint8_t* data, size_t size, uint64_t max_tensor_bytes) {
  using namespace tensord;
  v1::PutHeader header;
  if (!header.ParseFromArray(data, static_cast<int>(size))) return;
  absl::StatusOr<ValidatedPut> put = ValidatePutHeader(header, max_tensor_bytes);
  if (!put.ok()) {
    const absl::StatusCode code = put.status().code();
    Check(code == absl::StatusCode::kInvalidArgument ||
          code == absl::StatusCode::kResourceExhausted ||
          code == absl::StatusCode::kFailedPrecondition);
    Check(!put.status().message().empty());
    return;
  }
  Check(put->name == header.name() && ValidateTensorName(put->name).ok());
  // Host (kDLCUDAHost folded into it) or a CUDA device the registry checks.
  Check((put->layout.device.device_type == kDLCPU && put->layout.device.device_id == 0) ||
        (put->layout.device.device_type == kDLCUDA && put->layout.device.device_id >= 0));
  Check(dlpack::ValidateDataType(put->layout.dtype).ok());
  absl::StatusOr<uint64_t> required = dlpack::RequiredBytes(put->layout);
  Check(required.ok() && *required == put->total_bytes);
  Check(put->total_bytes == header.total_bytes() && put->total_bytes <= max_tensor_bytes);
  Check(put->total_bytes >= put->layout.byte_offset);
  Check(dlpack::ValidateLayoutFits(put->layout, put->total_bytes).ok());
  Check(put->crc32c.has_value() == header.has_crc32c());
  if (put->crc32c.has_value()) Check(*put->crc32c == header.crc32c());
  Check(!dlpack::DescribeLayout(put->layout).empty());
  // A part of a put in several streams: a host tensor, a range inside it.
  Check(put->part.has_value() == header.has_part());
  if (put->part.has_value()) {
    const ValidatedPutPart& part = *put->part;
    Check(part.upload_id.size() == 32 && part.upload_id == header.part().upload_id());
    Check(part.parts >= 2 && part.parts <= kMaxPutParts);
    Check(part.length > 0 && part.offset < put->total_bytes &&
          part.length <= put->total_bytes - part.offset);
    Check(put->layout.device.device_type == kDLCPU);
  }

  // A Fetch sends the layout back with strides filled in; a client may put
  // exactly that again, so it must still validate to the same size.
  v1::TensorLayout wire;
  LayoutToProto(put->layout, &wire);
  absl::StatusOr<dlpack::TensorLayout> again = LayoutFromProto(wire);
  Check(again.ok());
  Check(dlpack::operator==(again->dtype, put->layout.dtype));
  Check(again->shape == put->layout.shape);
  Check(again->strides == dlpack::EffectiveStrides(put->layout));
  Check(again->byte_offset == put->layout.byte_offset);
  absl::StatusOr<uint64_t> required_again = dlpack::RequiredBytes(*again);
  Check(required_again.ok() && *required_again == put->total_bytes);
  Check(dlpack::IsCompact(*again) == dlpack::IsCompact(put->layout));
}

void FuzzFetchRequest(const uint8_t* data, size_t size, uint64_t total_bytes) {
  using namespace tensord;
  v1::FetchRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  absl::StatusOr<ByteSpan> span = ResolveFetchRange(request, total_bytes);
  if (!span.ok()) {
    // The header says INVALID_ARGUMENT; the implementation answers
    // OUT_OF_RANGE. Either is a clean rejection.
    const absl::StatusCode code = span.status().code();
    Check(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kOutOfRange);
    Check(!span.status().message().empty());
    Check(request.has_range());
    return;
  }
  Check(span->offset <= total_bytes && span->length <= total_bytes - span->offset);
  if (!request.has_range()) {
    Check(span->offset == 0 && span->length == total_bytes);
  } else {
    Check(span->offset == request.range().offset());
    if (request.range().length() != 0) {
      Check(span->length == request.range().length());
    } else {
      Check(span->offset + span->length == total_bytes);
    }
  }
}

}  // namespace

// Protobuf logs every string field with invalid UTF-8 it rejects; at
// thousands of inputs a second that is only noise.
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  const uint8_t mode = data[0];
  uint64_t limit = 0;
  for (int i = 8; i >= 1; --i) limit = limit << 8 | data[i];
  limit >>= (mode >> 1) & 63;
  if (mode & 1) {
    FuzzFetchRequest(data + 9, size - 9, limit);
  } else {
    FuzzPutHeader(data + 9, size - 9, limit);
  }
  return 0;
}
