// Request ids tie a call's log lines to the client that made it: a client's
// `x-request-id` metadata when it is sane, a generated one otherwise.
#ifndef TENSORD_SERVICE_WIRE_REQUEST_ID_H_
#define TENSORD_SERVICE_WIRE_REQUEST_ID_H_

#include <string>

#include "absl/strings/string_view.h"

namespace grpc {
class CallbackServerContext;
}

namespace tensord {

inline constexpr absl::string_view kRequestIdMetadataKey = "x-request-id";
inline constexpr size_t kMaxRequestIdLength = 128;

// 1..128 characters from [A-Za-z0-9._:/+=-]: enough for UUIDs, trace ids
// and "service/123", and nothing that could forge or split a log line.
bool IsValidRequestId(absl::string_view id);

// 16 random lowercase hex digits. Thread-safe.
std::string GenerateRequestId();

// The client's `x-request-id` when it sent a valid one; empty otherwise.
std::string OfferedRequestId(grpc::CallbackServerContext& context);

// Sends `id` back to the client in the initial metadata under the same
// key: call it before the first write or Finish.
void EchoRequestId(grpc::CallbackServerContext& context, const std::string& id);

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_REQUEST_ID_H_
