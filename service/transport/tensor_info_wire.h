// v1::TensorInfo's wire bytes, written straight from a stored version: the
// bytes InfoToProto and then SerializeToArray give (tensor_info_wire_test
// holds them byte-equal across layouts, devices and values), without
// building, sizing and walking the message. Stat and every small fetch
// answer with one; the message path cost about 3,000 instructions of a
// 4 KiB fetch's 66,000 on the server (callgrind, scripts/count-small-call-
// instructions.sh).
#ifndef TENSORD_SERVICE_TRANSPORT_TENSOR_INFO_WIRE_H_
#define TENSORD_SERVICE_TRANSPORT_TENSOR_INFO_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include <grpcpp/support/byte_buffer.h>

#include "absl/container/inlined_vector.h"
#include "service/registry/tensor_version.h"

namespace tensord {

class TensorInfoWire {
 public:
  // `version` must outlive this.
  explicit TensorInfoWire(const TensorVersion& version);
  TensorInfoWire(const TensorInfoWire&) = delete;
  TensorInfoWire& operator=(const TensorInfoWire&) = delete;

  size_t size() const { return size_; }
  // Writes size() bytes at `out`; returns the end.
  uint8_t* Write(uint8_t* out) const;

 private:
  const TensorVersion& version_;
  // Read once: the size counts their varints.
  const uint64_t open_leases_;
  const int64_t created_unix_nanos_;
  // Compact strides when the layout stores none (Fetch always sends them).
  absl::InlinedVector<int64_t, 8> compact_strides_;
  std::span<const int64_t> strides_;
  size_t dtype_size_ = 0;
  size_t shape_size_ = 0;    // packed payload
  size_t strides_size_ = 0;  // packed payload
  size_t device_size_ = 0;
  size_t layout_size_ = 0;
  size_t size_ = 0;
};

// A StatResponse naming `version`.
grpc::ByteBuffer EncodeStatResponse(const TensorVersion& version);

// A FetchHeader naming `version` and the range [offset, offset + length),
// with `split` set when true; its inline data is framed after it
// (MakeInlineHeaderBuffer).
class FetchHeaderWire {
 public:
  FetchHeaderWire(const TensorVersion& version, uint64_t offset, uint64_t length, bool split);

  size_t size() const { return size_; }
  uint8_t* Write(uint8_t* out) const;

 private:
  const TensorInfoWire info_;
  const uint64_t offset_;
  const uint64_t length_;
  const bool split_;
  size_t range_size_ = 0;
  size_t size_ = 0;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_TENSOR_INFO_WIRE_H_
