// Speaks tensord.v1 through the generated stub, for what the C++ client
// cannot express (malformed puts, raw ranges) and to check the wire protocol.
#ifndef TENSORD_TESTS_INTEGRATION_RAW_STUB_H_
#define TENSORD_TESTS_INTEGRATION_RAW_STUB_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensord/v1/tensor_service.grpc.pb.h"

namespace tensord::testing {

using RawStub = v1::TensorService::Stub;

// A stub on its own channel to `address` (any gRPC target). With
// `small_window` the channel keeps HTTP/2 flow control at its initial 64 KiB
// (no BDP probing), so a reader that stops reading soon stalls the server.
std::unique_ptr<RawStub> NewRawStub(const std::string& address, bool small_window = false);

// A context whose deadline keeps a hung server from hanging the test.
std::unique_ptr<grpc::ClientContext> RawContext();

v1::DataType RawDataType(uint32_t code, uint32_t bits, uint32_t lanes = 1);

// The first message of a put.
v1::PutRequest HeaderMessage(std::string_view name, const v1::DataType& dtype,
                             std::vector<int64_t> shape, uint64_t total_bytes,
                             std::vector<int64_t> strides = {}, uint64_t byte_offset = 0);
v1::PutRequest ChunkMessage(uint64_t offset, std::string_view data);

// The messages of one part of a put in parts of `bytes` (a compact uint8
// tensor of shape {bytes.size()}): the header with the part set, then the
// part's bytes [offset, offset + length) in chunks of 256 KiB, the last
// `short_by` bytes left out.
std::vector<v1::PutRequest> PartMessages(std::string_view name, std::string_view bytes,
                                         std::string_view upload_id, uint32_t parts,
                                         uint64_t offset, uint64_t length, uint64_t short_by = 0);

// Sends `messages` in order (stopping at the first failed write), then
// WritesDone, and returns the call's status. With `writes_done` false the
// call is cancelled instead: an interrupted put. A `bearer_token` goes in
// the authorization metadata.
grpc::Status RawPut(RawStub& stub, const std::vector<v1::PutRequest>& messages,
                    v1::PutResponse* response = nullptr, bool writes_done = true,
                    std::string_view bearer_token = {});
// The same through PutPart (one part of a put in several streams).
grpc::Status RawPutPart(RawStub& stub, const std::vector<v1::PutRequest>& messages,
                        v1::PutResponse* response = nullptr, bool writes_done = true,
                        std::string_view bearer_token = {});

// A whole put of `bytes` as a compact uint8 tensor of shape {bytes.size()},
// sent in chunks of at most `chunk_bytes`.
grpc::Status RawPutBytes(RawStub& stub, std::string_view name, std::string_view bytes,
                         v1::PutResponse* response = nullptr, size_t chunk_bytes = 1 << 20);

struct RawFetchResult {
  v1::FetchHeader header;
  std::string bytes;         // the header's inline data or the chunks' data
  bool inline_data = false;  // the bytes came in the header
  size_t chunks = 0;
  uint64_t largest_chunk = 0;
};

// Reads a whole fetch stream, recording (ADD_FAILURE) any violation of the
// stream protocol: a header first, then either its inline data and nothing
// more, or chunks at increasing absolute offsets that exactly cover the
// header's range.
grpc::Status RawFetch(RawStub& stub, const v1::FetchRequest& request, RawFetchResult* result);

grpc::Status RawStat(RawStub& stub, std::string_view name, uint64_t version = 0,
                     v1::TensorInfo* info = nullptr);

// Converts `bytes` to the std::string protobuf uses.
std::string AsString(const std::vector<uint8_t>& bytes);

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_INTEGRATION_RAW_STUB_H_
