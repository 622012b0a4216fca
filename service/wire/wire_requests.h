// Requests of the hottest small call parsed by hand on the server, with
// protobuf's rules (wire_reader.h): a Stat request's name is viewed in the
// received bytes, not copied into a message (the generated parse and the
// message's free were a fifth of what tensord added to a Stat on the
// server). wire_tensor_info_fuzz holds it to the generated parser.
#ifndef TENSORD_SERVICE_WIRE_WIRE_REQUESTS_H_
#define TENSORD_SERVICE_WIRE_WIRE_REQUESTS_H_

#include <cstdint>
#include <span>

#include "absl/strings/string_view.h"

namespace tensord {

struct WireStatRequest {
  absl::string_view name;  // into the parsed bytes
  uint64_t version = 0;
};

// False where v1::StatRequest::ParseFromArray would be.
bool ParseWireStatRequest(std::span<const uint8_t> bytes, WireStatRequest& out);

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_WIRE_REQUESTS_H_
