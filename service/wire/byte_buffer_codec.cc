#include "service/wire/byte_buffer_codec.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "service/common/status_macros.h"
#include "service/wire/varint.h"

namespace tensord {

absl::Status ByteBufferDecoder::Decode(const grpc::ByteBuffer& buffer,
                                       HeaderInlineData inline_data) {
  slices_.clear();
  pieces_.clear();
  // Most messages are one slice: taken by reference, without the vectors.
  if (buffer.TrySingleSlice(&single_slice_).ok()) {
    single_piece_ = {single_slice_.begin(), single_slice_.size()};
    return DecodeStreamMessage({&single_piece_, 1}, message_, inline_data);
  }
  single_slice_ = grpc::Slice();
  single_piece_ = {};
  if (grpc::Status status = buffer.Dump(&slices_); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("unreadable message: ", status.error_message()));
  }
  for (const grpc::Slice& slice : slices_) pieces_.emplace_back(slice.begin(), slice.size());
  return DecodeStreamMessage(pieces_, message_, inline_data);
}

grpc::ByteBuffer MakeChunkBuffer(uint64_t offset, const void* data, size_t size,
                                 void (*release)(void*), void* user_data) {
  uint8_t prefix[kMaxChunkPrefixBytes];
  size_t prefix_size = EncodeChunkPrefix(offset, size, prefix);
  grpc::Slice slices[2] = {
      grpc::Slice(prefix, prefix_size),  // copied: a few bytes
      grpc::Slice(const_cast<void*>(data), size, release, user_data),
  };
  return grpc::ByteBuffer(slices, 2);
}

grpc::ByteBuffer MakeCopiedChunkBuffer(uint64_t offset, std::span<const uint8_t> data) {
  uint8_t prefix[kMaxChunkPrefixBytes];
  size_t prefix_size = EncodeChunkPrefix(offset, data.size(), prefix);
  grpc::Slice slices[2] = {
      grpc::Slice(prefix, prefix_size), grpc::Slice(data.data(), data.size()),  // copies
  };
  return grpc::ByteBuffer(slices, 2);
}

grpc::ByteBuffer SerializeToByteBuffer(const google::protobuf::MessageLite& message) {
  // Straight into the slice: no intermediate string to allocate and copy.
  grpc::Slice slice(message.ByteSizeLong());
  message.SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
  return grpc::ByteBuffer(&slice, 1);
}

grpc::ByteBuffer EncodeNameVersionRequest(absl::string_view name, uint64_t version) {
  // name = 1 (string), version = 2 (uint64) in both messages.
  const size_t name_field = name.empty() ? 0 : LengthDelimitedFieldSize(name.size());
  grpc::Slice slice(name_field + ScalarFieldSize(version));
  auto* out = const_cast<uint8_t*>(slice.begin());
  if (!name.empty()) {
    out = PutLengthPrefix(1, name.size(), out);
    std::memcpy(out, name.data(), name.size());
    out += name.size();
  }
  PutScalarField(2, version, out);
  return grpc::ByteBuffer(&slice, 1);
}

grpc::ByteBuffer MakeInlineHeaderBuffer(const google::protobuf::MessageLite& header,
                                        grpc::Slice inline_data) {
  return MakeInlineHeaderBuffer(
      header.ByteSizeLong(),
      [&header](uint8_t* out) { header.SerializeWithCachedSizesToArray(out); },
      std::move(inline_data));
}

grpc::ByteBuffer MakeInlineHeaderBuffer(size_t header_size,
                                        absl::FunctionRef<void(uint8_t*)> write_header,
                                        grpc::Slice inline_data) {
  const size_t data_size = inline_data.size();
  uint8_t framing[kMaxInlineFramingBytes];
  const size_t inline_framing = EncodeInlineDataFraming(data_size, framing);
  const size_t total_header = header_size + inline_framing + data_size;
  uint8_t outer[kMaxInlineFramingBytes];
  const size_t outer_size = EncodeHeaderFraming(total_header, outer);
  grpc::Slice prefix(outer_size + header_size + inline_framing);
  auto* out = const_cast<uint8_t*>(prefix.begin());
  std::memcpy(out, outer, outer_size);
  write_header(out + outer_size);
  std::memcpy(out + outer_size + header_size, framing, inline_framing);
  grpc::Slice slices[2] = {std::move(prefix), std::move(inline_data)};
  return grpc::ByteBuffer(slices, 2);
}

grpc::ByteBuffer MakeHeaderBuffer(size_t header_size,
                                  absl::FunctionRef<void(uint8_t*)> write_header) {
  uint8_t outer[kMaxInlineFramingBytes];
  const size_t outer_size = EncodeHeaderFraming(header_size, outer);
  grpc::Slice slice(outer_size + header_size);
  auto* out = const_cast<uint8_t*>(slice.begin());
  std::memcpy(out, outer, outer_size);
  write_header(out + outer_size);
  return grpc::ByteBuffer(&slice, 1);
}

absl::Status FlattenByteBuffer(const grpc::ByteBuffer& buffer, grpc::Slice& slice,
                               absl::string_view what) {
  // A small message arrives as one slice: referenced, not copied.
  if (buffer.TrySingleSlice(&slice).ok()) return absl::OkStatus();
  if (grpc::Status status = buffer.DumpToSingleSlice(&slice); !status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is unreadable: ", status.error_message()));
  }
  return absl::OkStatus();
}

absl::Status ParseFromByteBuffer(const grpc::ByteBuffer& buffer,
                                 google::protobuf::MessageLite& message, absl::string_view what) {
  grpc::Slice slice;
  TENSORD_RETURN_IF_ERROR(FlattenByteBuffer(buffer, slice, what));
  if (!message.ParseFromArray(slice.begin(), static_cast<int>(slice.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is not a valid ", message.GetTypeName()));
  }
  return absl::OkStatus();
}

}  // namespace tensord
