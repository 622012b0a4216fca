// A BatchPut's answer (v1::BatchPutResponse) written by hand into one
// slice, byte for byte what the generated serializer writes
// (BatchPutAnswerTest): building it as messages made and freed a message
// per item, a twentieth of the server's work in a BatchPut of 1024 x 4 KiB.
#ifndef TENSORD_SERVICE_WIRE_BATCH_PUT_ANSWER_H_
#define TENSORD_SERVICE_WIRE_BATCH_PUT_ANSWER_H_

#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"

namespace tensord {

// One item's outcome: code 0 and what was published, or why not.
struct BatchPutItemOutcome {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string message;  // with a failure; may be cut or empty (the answer's budget)
  uint64_t version = 0;
  uint32_t crc32c = 0;
  int64_t created_unix_nanos = 0;
};

grpc::ByteBuffer EncodeBatchPutAnswer(std::span<const BatchPutItemOutcome> items,
                                      uint64_t group_version, uint64_t cluster_group);

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_BATCH_PUT_ANSWER_H_
