// The client side of a Fetch stream, without gRPC: takes the decoded
// messages (a header, then chunks in order) and puts the bytes where the
// caller wants them. The server is a peer, not trusted blindly: every range,
// offset and size it sends is checked before a byte is written.
#ifndef TENSORD_CLIENT_SRC_FETCH_STREAM_RECEIVER_H_
#define TENSORD_CLIENT_SRC_FETCH_STREAM_RECEIVER_H_

#include <cassert>
#include <cstdint>
#include <span>

#include "absl/base/attributes.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/wire/stream_message.h"
#include "service/wire/wire_tensor_info.h"
#include "tensord/client.h"
#include "tensord/tensor.h"

namespace tensord {

class FetchStreamReceiver {
 public:
  // Where the range's bytes go: called once, with the header's info and the
  // range length, before any byte is written; must return that many
  // writable bytes. Must outlive the receiver.
  using DestinationFor =
      absl::FunctionRef<absl::StatusOr<uint8_t*>(const TensorInfo& info, uint64_t range_length)>;

  // `options`: verify_crc32c and progress are honoured; must outlive the
  // receiver.
  FetchStreamReceiver(const FetchOptions& options ABSL_ATTRIBUTE_LIFETIME_BOUND,
                      DestinationFor destination_for ABSL_ATTRIBUTE_LIFETIME_BOUND)
      : options_(options), destination_for_(destination_for) {}

  // The next message of the stream, decoded with HeaderInlineData::kLift
  // (a header's inline bytes are taken from StreamMessage::inline_data).
  // After an error the stream is unusable.
  absl::Status Receive(const StreamMessage& message);
  // Instead of Receive: a whole answer (FetchInline's) whose header was
  // parsed with its inline bytes, which must stay valid during the call.
  absl::Status ReceiveWholeAnswer(WireFetchHeader&& header);

  // True once the header and every byte of its range are in: the server
  // sent its status with the last message, so no further Read is needed.
  // A `split` header (FetchRequest.split_above_bytes) completes the stream
  // with no bytes.
  bool complete() const { return has_header_ && (split_ || received_ == range_length_); }

  // After a complete stream: whether the server asked for the range in
  // parts, the range it resolved, and (verify_crc32c) the CRC-32C of the
  // range's received bytes.
  bool split() const { return split_; }
  uint64_t range_offset() const { return range_offset_; }
  uint64_t range_length() const { return range_length_; }
  uint32_t received_crc32c() const { return crc_; }

  // Once the stream ended well: OK, or DATA_LOSS when bytes are missing or
  // (verify_crc32c, whole tensor) do not match the version's CRC-32C.
  absl::Status Finish();
  // After Finish said OK: the version's info, moved out (once).
  TensorInfo TakeInfo() {
    assert(has_header_ && !info_taken_);
    info_taken_ = true;
    return std::move(info_);
  }

 private:
  absl::Status ReceiveHeader(const StreamMessage& message);
  // The header's checks, the destination and, when header.has_inline_data,
  // the inline bytes: `inline_data`, pieces in order (the header's own view,
  // or the stream decoder's lifted pieces).
  absl::Status AcceptHeader(WireFetchHeader&& header,
                            std::span<const std::span<const uint8_t>> inline_data);
  absl::Status ReceiveChunk(const StreamMessage& message);
  // Counts `size` more bytes written (and checksummed) and reports progress.
  void Accepted(uint64_t size);

  const FetchOptions& options_;
  const DestinationFor destination_for_;
  // The header's info, filled in place; meaningful once has_header_.
  TensorInfo info_;
  bool has_header_ = false;
  bool info_taken_ = false;
  uint8_t* destination_ = nullptr;
  uint64_t range_offset_ = 0;
  uint64_t range_length_ = 0;
  uint64_t received_ = 0;
  uint32_t crc_ = 0;
  bool split_ = false;
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_FETCH_STREAM_RECEIVER_H_
