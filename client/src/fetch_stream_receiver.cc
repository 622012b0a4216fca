#include "client/src/fetch_stream_receiver.h"

#include <cstring>

#include "client/src/info_conversion.h"
#include "service/common/status_macros.h"

namespace tensord {

absl::Status FetchStreamReceiver::Open(WireFetchHeader& header) {
  TENSORD_ASSIGN_OR_RETURN(info_, InfoFromWire(std::move(header.info)));
  has_info_ = true;
  // A split header's bytes come in parts, each into its own place.
  if (header.split) return absl::OkStatus();
  TENSORD_ASSIGN_OR_RETURN(destination_, destination_for_(info_, header.range_length));
  return absl::OkStatus();
}

absl::Status FetchStreamReceiver::Write(uint64_t offset,
                                        std::span<const std::span<const uint8_t>> pieces,
                                        uint64_t /*size*/) {
  uint8_t* out = destination_ + offset;
  for (std::span<const uint8_t> piece : pieces) {
    std::memcpy(out, piece.data(), piece.size());
    out += piece.size();
  }
  return absl::OkStatus();
}

}  // namespace tensord
