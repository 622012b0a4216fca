// The receiving side of a Fetch answer, without gRPC, shared by the
// client's remote transport (client/src/fetch_stream_receiver.h) and a
// cluster node's pulls from other nodes (service/cluster/peer_pull.cc):
// takes the decoded stream messages (a header, then chunks in order) or a
// whole FetchInline answer, and hands the range's bytes to a sink. The
// sender is not trusted: every range, offset and size it sends is checked
// before a byte reaches the sink, and a whole tensor's bytes are summed
// against the CRC-32C its header states.
#ifndef TENSORD_SERVICE_WIRE_FETCH_RECEIVER_H_
#define TENSORD_SERVICE_WIRE_FETCH_RECEIVER_H_

#include <cstdint>
#include <functional>
#include <span>
#include "absl/strings/string_view.h"

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "service/wire/stream_message.h"
#include "service/wire/wire_tensor_info.h"

namespace tensord {

class FetchReceiver {
 public:
  // Where the range's bytes go.
  class Sink {
   public:
    virtual ~Sink() = default;
    // Once, before any byte, with a header whose range lies within its
    // info's size; also for a split header (`header.split`: no bytes
    // follow). May move fields out of `header.info`. A non-OK answer
    // refuses the header and is the receive's answer, as it is.
    virtual absl::Status Open(WireFetchHeader& header) = 0;
    // The range's bytes, in order: `offset` counts from the range's start;
    // the pieces hold `size` bytes together.
    virtual absl::Status Write(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                               uint64_t size) = 0;
  };

  struct Options {
    // Sum the bytes; Finish compares a whole tensor's sum with its info's.
    bool verify_crc32c = true;
    // Called after each message's bytes with (received, range length);
    // null or empty: none. Must outlive the receiver.
    const std::function<void(uint64_t, uint64_t)>* progress = nullptr;
    // The code of an answer that breaks the protocol: INTERNAL for the
    // client (its server is at fault), DATA_LOSS for a pull (the holder's
    // copy is not trusted).
    absl::StatusCode violation = absl::StatusCode::kInternal;
  };

  // Errors name the fetch as "<noun> '<name>'" ("fetch of 'w'", "node b's
  // copy of 'w'"). Every argument must outlive the receiver.
  FetchReceiver(const Options& options ABSL_ATTRIBUTE_LIFETIME_BOUND,
                Sink& sink ABSL_ATTRIBUTE_LIFETIME_BOUND,
                absl::string_view noun ABSL_ATTRIBUTE_LIFETIME_BOUND,
                absl::string_view name ABSL_ATTRIBUTE_LIFETIME_BOUND)
      : options_(options), sink_(sink), noun_(noun), name_(name) {}

  // The next message of the stream, decoded with HeaderInlineData::kLift
  // (a header's inline bytes are taken from StreamMessage::inline_data).
  // After an error the stream is unusable.
  absl::Status Receive(const StreamMessage& message);
  // Instead of Receive: a whole answer (FetchInline's) whose header was
  // parsed with its inline bytes, which must stay valid during the call.
  absl::Status ReceiveWholeAnswer(WireFetchHeader&& header);

  // True once the header and every byte of its range are in (the sender
  // put its status on the last message, so no further read is needed). A
  // split header (FetchRequest.split_above_bytes) completes the stream
  // with no bytes.
  bool complete() const { return has_header_ && (split_ || received_ == range_length_); }

  // Once the stream ended well: OK, or DATA_LOSS when bytes are missing or
  // (verify_crc32c, whole tensor) do not match the header's CRC-32C.
  absl::Status Finish() const;

  // After a header: whether the sender asked for the range in parts, the
  // range it resolved, the tensor's size and stated CRC-32C, and (with
  // verify_crc32c) the CRC-32C of the bytes received.
  bool split() const { return split_; }
  uint64_t range_offset() const { return range_offset_; }
  uint64_t range_length() const { return range_length_; }
  uint64_t total_bytes() const { return total_bytes_; }
  uint32_t stated_crc32c() const { return stated_crc32c_; }
  uint32_t received_crc32c() const { return crc_; }

 private:
  absl::Status ReceiveHeader(const StreamMessage& message);
  // The header's checks, the sink's Open and, when header.has_inline_data,
  // the inline bytes: `inline_data`, pieces in order.
  absl::Status AcceptHeader(WireFetchHeader& header,
                            std::span<const std::span<const uint8_t>> inline_data);
  absl::Status ReceiveChunk(const StreamMessage& message);
  // Hands `size` bytes at received_ to the sink, sums and counts them.
  absl::Status Deliver(std::span<const std::span<const uint8_t>> pieces, uint64_t size);
  absl::Status Violation(absl::string_view why) const;

  const Options& options_;
  Sink& sink_;
  const absl::string_view noun_;
  const absl::string_view name_;
  bool has_header_ = false;
  bool split_ = false;
  uint64_t total_bytes_ = 0;
  uint32_t stated_crc32c_ = 0;
  uint64_t range_offset_ = 0;
  uint64_t range_length_ = 0;
  uint64_t received_ = 0;
  uint32_t crc_ = 0;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_FETCH_RECEIVER_H_
