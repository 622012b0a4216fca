#include "client/src/fetch_stream_receiver.h"

#include <cstring>
#include <span>

#include "absl/strings/str_cat.h"
#include "client/src/info_conversion.h"
#include "service/common/crc32c.h"
#include "service/common/status_macros.h"
#include "service/wire/wire_tensor_info.h"

namespace tensord {

absl::Status FetchStreamReceiver::Receive(const StreamMessage& message) {
  return has_header_ ? ReceiveChunk(message) : ReceiveHeader(message);
}

absl::Status FetchStreamReceiver::ReceiveHeader(const StreamMessage& message) {
  WireFetchHeader header;
  if (message.kind != StreamMessage::Kind::kHeader ||
      !ParseWireFetchHeader(
          {reinterpret_cast<const uint8_t*>(message.header.data()), message.header.size()},
          header)) {
    return absl::InternalError("fetch stream did not start with a valid header");
  }
  // The stream decoder lifted the inline bytes out of the header
  // (HeaderInlineData::kLift).
  header.has_inline_data = message.has_inline_data;
  return AcceptHeader(std::move(header), message.inline_data);
}

absl::Status FetchStreamReceiver::ReceiveWholeAnswer(WireFetchHeader&& header) {
  if (has_header_) return absl::InternalError("fetch answer after the header");
  const std::span<const uint8_t> inline_data = header.inline_data;
  return AcceptHeader(std::move(header), {&inline_data, 1});
}

absl::Status FetchStreamReceiver::AcceptHeader(
    WireFetchHeader&& header, std::span<const std::span<const uint8_t>> inline_data) {
  const bool has_inline_data = header.has_inline_data;
  // info_ counts only once has_header_ is set.
  TENSORD_ASSIGN_OR_RETURN(info_, InfoFromWire(std::move(header.info)));
  const uint64_t offset = header.range_offset;
  const uint64_t length = header.range_length;
  if (offset > info_.total_bytes || length > info_.total_bytes - offset) {
    return absl::InternalError(absl::StrCat("server sent range [", offset, ", +", length, ") of a ",
                                            info_.total_bytes, "-byte tensor"));
  }
  if (header.split) {
    // No bytes follow; the caller fetches the range in parts.
    has_header_ = true;
    range_offset_ = offset;
    range_length_ = length;
    split_ = true;
    return absl::OkStatus();
  }
  // The destination is asked for first: a caller's own mismatch (FetchInto's
  // dtype or shape) is reported before the server's inline-size fault.
  TENSORD_ASSIGN_OR_RETURN(destination_, destination_for_(info_, length));
  uint64_t inline_size = 0;
  for (std::span<const uint8_t> piece : inline_data) inline_size += piece.size();
  if (has_inline_data && inline_size != length) {
    return absl::InternalError(absl::StrCat("fetch header carried ", inline_size,
                                            " inline bytes of a ", length, "-byte range"));
  }
  has_header_ = true;
  range_offset_ = offset;
  range_length_ = length;
  if (has_inline_data) {
    uint8_t* out = destination_;
    for (std::span<const uint8_t> piece : inline_data) {
      std::memcpy(out, piece.data(), piece.size());
      out += piece.size();
    }
    if (options_.verify_crc32c) crc_ = Crc32cExtend(crc_, destination_, length);
    Accepted(length);
  }
  return absl::OkStatus();
}

absl::Status FetchStreamReceiver::ReceiveChunk(const StreamMessage& message) {
  if (message.kind != StreamMessage::Kind::kChunk ||
      message.chunk_offset != range_offset_ + received_ ||
      message.chunk_size > range_length_ - received_) {
    return absl::InternalError(absl::StrCat("fetch stream sent an unexpected message at byte ",
                                            received_, " of ", range_length_));
  }
  uint8_t* out = destination_ + received_;
  for (std::span<const uint8_t> piece : message.chunk_pieces) {
    std::memcpy(out, piece.data(), piece.size());
    if (options_.verify_crc32c) crc_ = Crc32cExtend(crc_, out, piece.size());
    out += piece.size();
  }
  Accepted(message.chunk_size);
  return absl::OkStatus();
}

void FetchStreamReceiver::Accepted(uint64_t size) {
  received_ += size;
  if (options_.progress) options_.progress(received_, range_length_);
}

absl::Status FetchStreamReceiver::Finish() {
  if (!has_header_) return absl::InternalError("fetch stream ended without a header");
  if (split_) return absl::OkStatus();
  if (received_ != range_length_) {
    return absl::DataLossError(absl::StrCat("fetch of '", info_.name, "' ended after ", received_,
                                            " of ", range_length_, " bytes"));
  }
  if (options_.verify_crc32c && range_offset_ == 0 && range_length_ == info_.total_bytes &&
      crc_ != info_.crc32c) {
    return absl::DataLossError(absl::StrCat("fetched bytes of '", info_.name, "' have crc32c ",
                                            crc_, "; the server stored ", info_.crc32c));
  }
  return absl::OkStatus();
}

}  // namespace tensord
