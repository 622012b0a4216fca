// The bytes of a grpc::ByteBuffer as one string, for tests that hold
// hand-written messages to the generated serializer's bytes.
#ifndef TENSORD_TESTS_UNIT_GRPC_BUFFER_BYTES_H_
#define TENSORD_TESTS_UNIT_GRPC_BUFFER_BYTES_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <string>

#include "gtest/gtest.h"

namespace tensord {

inline std::string BufferBytes(const grpc::ByteBuffer& buffer) {
  grpc::Slice slice;
  EXPECT_TRUE(buffer.DumpToSingleSlice(&slice).ok());
  return std::string(reinterpret_cast<const char*>(slice.begin()), slice.size());
}

}  // namespace tensord

#endif  // TENSORD_TESTS_UNIT_GRPC_BUFFER_BYTES_H_
