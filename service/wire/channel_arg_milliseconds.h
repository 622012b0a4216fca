// A duration as a gRPC channel argument in milliseconds (keepalive, idle and
// handshake timeouts), which gRPC takes as an int.
#ifndef TENSORD_SERVICE_WIRE_CHANNEL_ARG_MILLISECONDS_H_
#define TENSORD_SERVICE_WIRE_CHANNEL_ARG_MILLISECONDS_H_

#include <algorithm>
#include <cstdint>

#include "absl/time/time.h"

namespace tensord {

// At least 1 (several of these arguments read 0 as "off"), at most
// INT32_MAX (an infinite duration included).
inline int ChannelArgMilliseconds(absl::Duration duration) {
  return static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(duration), 1, INT32_MAX));
}

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_CHANNEL_ARG_MILLISECONDS_H_
