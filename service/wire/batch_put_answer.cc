#include "service/wire/batch_put_answer.h"

#include <grpcpp/support/slice.h>

#include <cassert>

#include "service/wire/varint.h"

namespace tensord {
namespace {

// tensor_service.proto's and tensor.proto's numbers.
enum BatchPutAnswerField : uint32_t {
  kResponseItems = 1,
  kResponseGroupVersion = 2,
  kResponseClusterGroup = 3,
  kResultStatus = 1,
  kResultVersion = 2,
  kResultCrc32c = 3,
  kResultCreated = 4,
  kStatusCode = 1,
  kStatusMessage = 2,
};

// The status submessage is set only for a failure, as the server always
// built it.
size_t StatusSize(const BatchPutItemOutcome& item) {
  return ScalarFieldSize(Int32Bits(static_cast<int32_t>(item.code))) +
         (item.message.empty() ? 0 : LengthDelimitedFieldSize(item.message.size()));
}

size_t ResultSize(const BatchPutItemOutcome& item) {
  const size_t status =
      item.code == absl::StatusCode::kOk ? 0 : LengthDelimitedFieldSize(StatusSize(item));
  return status + ScalarFieldSize(item.version) + ScalarFieldSize(item.crc32c) +
         ScalarFieldSize(static_cast<uint64_t>(item.created_unix_nanos));
}

}  // namespace

grpc::ByteBuffer EncodeBatchPutAnswer(std::span<const BatchPutItemOutcome> items,
                                      uint64_t group_version, uint64_t cluster_group) {
  size_t size = ScalarFieldSize(group_version) + ScalarFieldSize(cluster_group);
  for (const BatchPutItemOutcome& item : items) size += LengthDelimitedFieldSize(ResultSize(item));
  grpc::Slice slice(size);
  auto* const start = const_cast<uint8_t*>(slice.begin());
  uint8_t* out = start;
  for (const BatchPutItemOutcome& item : items) {
    out = PutLengthPrefix(kResponseItems, ResultSize(item), out);
    if (item.code != absl::StatusCode::kOk) {
      out = PutLengthPrefix(kResultStatus, StatusSize(item), out);
      out = PutScalarField(kStatusCode, Int32Bits(static_cast<int32_t>(item.code)), out);
      out = PutBytesField(kStatusMessage, item.message, out);
    }
    out = PutScalarField(kResultVersion, item.version, out);
    out = PutScalarField(kResultCrc32c, item.crc32c, out);
    out = PutScalarField(kResultCreated, static_cast<uint64_t>(item.created_unix_nanos), out);
  }
  out = PutScalarField(kResponseGroupVersion, group_version, out);
  out = PutScalarField(kResponseClusterGroup, cluster_group, out);
  assert(out == start + size);  // sizes above match the writes
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace tensord
