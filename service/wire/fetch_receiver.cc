#include "service/wire/fetch_receiver.h"

#include "absl/strings/str_cat.h"
#include "service/common/crc32c.h"
#include "service/common/status_macros.h"

namespace tensord {

absl::Status FetchReceiver::Violation(absl::string_view why) const {
  return absl::Status(options_.violation, absl::StrCat(noun_, " '", name_, "': ", why));
}

absl::Status FetchReceiver::Receive(const StreamMessage& message) {
  return has_header_ ? ReceiveChunk(message) : ReceiveHeader(message);
}

absl::Status FetchReceiver::ReceiveHeader(const StreamMessage& message) {
  WireFetchHeader header;
  if (message.kind != StreamMessage::Kind::kHeader ||
      !ParseWireFetchHeader(
          {reinterpret_cast<const uint8_t*>(message.header.data()), message.header.size()},
          header)) {
    return Violation("the answer did not start with a valid header");
  }
  // The stream decoder lifted the inline bytes out of the header
  // (HeaderInlineData::kLift).
  header.has_inline_data = message.has_inline_data;
  return AcceptHeader(header, message.inline_data);
}

absl::Status FetchReceiver::ReceiveWholeAnswer(WireFetchHeader&& header) {
  if (has_header_) return Violation("a whole answer after the header");
  const std::span<const uint8_t> inline_data = header.inline_data;
  return AcceptHeader(header, {&inline_data, 1});
}

absl::Status FetchReceiver::AcceptHeader(WireFetchHeader& header,
                                         std::span<const std::span<const uint8_t>> inline_data) {
  const uint64_t total = header.info.total_bytes;
  const uint64_t offset = header.range_offset;
  const uint64_t length = header.range_length;
  if (offset > total || length > total - offset) {
    return Violation(
        absl::StrCat("sent range [", offset, ", +", length, ") of a ", total, "-byte tensor"));
  }
  total_bytes_ = total;
  stated_crc32c_ = header.info.crc32c;
  const bool split = header.split;
  const bool has_inline_data = header.has_inline_data;
  // The sink is asked first: a caller's own mismatch (FetchInto's dtype or
  // shape) is reported before the sender's inline-size fault.
  TENSORD_RETURN_IF_ERROR(sink_.Open(header));
  if (split) {
    // No bytes follow; the caller fetches the range in parts.
    has_header_ = true;
    range_offset_ = offset;
    range_length_ = length;
    split_ = true;
    return absl::OkStatus();
  }
  uint64_t inline_size = 0;
  for (std::span<const uint8_t> piece : inline_data) inline_size += piece.size();
  if (has_inline_data && inline_size != length) {
    return Violation(absl::StrCat("the header carried ", inline_size, " inline bytes of a ", length,
                                  "-byte range"));
  }
  has_header_ = true;
  range_offset_ = offset;
  range_length_ = length;
  if (has_inline_data) return Deliver(inline_data, length);
  return absl::OkStatus();
}

absl::Status FetchReceiver::ReceiveChunk(const StreamMessage& message) {
  if (message.kind != StreamMessage::Kind::kChunk ||
      message.chunk_offset != range_offset_ + received_ ||
      message.chunk_size > range_length_ - received_) {
    return Violation(
        absl::StrCat("an unexpected message at byte ", received_, " of ", range_length_));
  }
  return Deliver(message.chunk_pieces, message.chunk_size);
}

absl::Status FetchReceiver::Deliver(std::span<const std::span<const uint8_t>> pieces,
                                    uint64_t size) {
  TENSORD_RETURN_IF_ERROR(sink_.Write(received_, pieces, size));
  if (options_.verify_crc32c) {
    for (std::span<const uint8_t> piece : pieces) {
      crc_ = Crc32cExtend(crc_, piece.data(), piece.size());
    }
  }
  received_ += size;
  if (options_.progress != nullptr && *options_.progress) {
    (*options_.progress)(received_, range_length_);
  }
  return absl::OkStatus();
}

absl::Status FetchReceiver::Finish() const {
  if (!has_header_) return Violation("the answer ended without a header");
  if (split_) return absl::OkStatus();
  if (received_ != range_length_) {
    return absl::DataLossError(absl::StrCat(noun_, " '", name_, "' ended after ", received_, " of ",
                                            range_length_, " bytes"));
  }
  if (options_.verify_crc32c && range_offset_ == 0 && range_length_ == total_bytes_ &&
      crc_ != stated_crc32c_) {
    return absl::DataLossError(absl::StrCat(noun_, " '", name_, "': the bytes have CRC-32C ", crc_,
                                            "; the sender stated ", stated_crc32c_));
  }
  return absl::OkStatus();
}

}  // namespace tensord
