// The client side of a Fetch answer: service/wire's FetchReceiver (every
// range, offset and size the server sends checked before a byte is
// written) with a sink that turns the header's info into a TensorInfo and
// writes the bytes where the caller wants them.
#ifndef TENSORD_CLIENT_SRC_FETCH_STREAM_RECEIVER_H_
#define TENSORD_CLIENT_SRC_FETCH_STREAM_RECEIVER_H_

#include <cassert>
#include <cstdint>
#include <span>
#include "absl/strings/string_view.h"

#include "absl/base/attributes.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/wire/fetch_receiver.h"
#include "service/wire/stream_message.h"
#include "service/wire/wire_tensor_info.h"
#include "tensord/client.h"
#include "tensord/tensor.h"

namespace tensord {

class FetchStreamReceiver final : private FetchReceiver::Sink {
 public:
  // Where the range's bytes go: called once, with the header's info and the
  // range length, before any byte is written; must return that many
  // writable bytes. Must outlive the receiver.
  using DestinationFor =
      absl::FunctionRef<absl::StatusOr<uint8_t*>(const TensorInfo& info, uint64_t range_length)>;

  // `options`: verify_crc32c and progress are honoured. `name` is the
  // fetched name, for errors. All must outlive the receiver.
  FetchStreamReceiver(const FetchOptions& options ABSL_ATTRIBUTE_LIFETIME_BOUND,
                      DestinationFor destination_for ABSL_ATTRIBUTE_LIFETIME_BOUND,
                      absl::string_view name ABSL_ATTRIBUTE_LIFETIME_BOUND)
      : receiver_options_{.verify_crc32c = options.verify_crc32c, .progress = &options.progress},
        destination_for_(destination_for),
        receiver_(receiver_options_, *this, "fetch of", name) {}

  // As FetchReceiver's.
  absl::Status Receive(const StreamMessage& message) { return receiver_.Receive(message); }
  absl::Status ReceiveWholeAnswer(WireFetchHeader&& header) {
    return receiver_.ReceiveWholeAnswer(std::move(header));
  }
  bool complete() const { return receiver_.complete(); }
  bool split() const { return receiver_.split(); }
  uint64_t range_offset() const { return receiver_.range_offset(); }
  uint64_t range_length() const { return receiver_.range_length(); }
  uint32_t received_crc32c() const { return receiver_.received_crc32c(); }
  absl::Status Finish() const { return receiver_.Finish(); }

  // After Finish said OK: the version's info, moved out (once).
  TensorInfo TakeInfo() {
    assert(has_info_ && !info_taken_);
    info_taken_ = true;
    return std::move(info_);
  }

 private:
  // FetchReceiver::Sink.
  absl::Status Open(WireFetchHeader& header) override;
  absl::Status Write(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                     uint64_t size) override;

  const FetchReceiver::Options receiver_options_;
  const DestinationFor destination_for_;
  FetchReceiver receiver_;
  // The header's info; meaningful once has_info_. A split header has none
  // converted: its info is filled from the first part's.
  TensorInfo info_;
  bool has_info_ = false;
  bool info_taken_ = false;
  uint8_t* destination_ = nullptr;
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_FETCH_STREAM_RECEIVER_H_
