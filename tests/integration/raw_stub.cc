#include "tests/integration/raw_stub.h"

#include <algorithm>
#include <chrono>

#include "gtest/gtest.h"

namespace tensord::testing {

std::unique_ptr<RawStub> NewRawStub(const std::string& address, bool small_window) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(64 << 20);
  arguments.SetMaxSendMessageSize(64 << 20);
  // A channel of its own, so tests never share a connection by accident.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (small_window) arguments.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  return v1::TensorService::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), arguments));
}

std::unique_ptr<grpc::ClientContext> RawContext() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return context;
}

v1::DataType RawDataType(uint32_t code, uint32_t bits, uint32_t lanes) {
  v1::DataType dtype;
  dtype.set_code(code);
  dtype.set_bits(bits);
  dtype.set_lanes(lanes);
  return dtype;
}

v1::PutRequest HeaderMessage(std::string_view name, const v1::DataType& dtype,
                             std::vector<int64_t> shape, uint64_t total_bytes,
                             std::vector<int64_t> strides, uint64_t byte_offset) {
  v1::PutRequest request;
  v1::PutHeader* header = request.mutable_header();
  header->set_name(std::string(name));
  v1::TensorLayout* layout = header->mutable_layout();
  *layout->mutable_dtype() = dtype;
  layout->mutable_shape()->Assign(shape.begin(), shape.end());
  layout->mutable_strides()->Assign(strides.begin(), strides.end());
  layout->set_byte_offset(byte_offset);
  header->set_total_bytes(total_bytes);
  return request;
}

v1::PutRequest ChunkMessage(uint64_t offset, std::string_view data) {
  v1::PutRequest request;
  request.mutable_chunk()->set_offset(offset);
  request.mutable_chunk()->set_data(std::string(data));
  return request;
}

std::vector<v1::PutRequest> PartMessages(std::string_view name, std::string_view bytes,
                                         std::string_view upload_id, uint32_t parts,
                                         uint64_t offset, uint64_t length, uint64_t short_by) {
  std::vector<v1::PutRequest> messages = {
      HeaderMessage(name, RawDataType(1, 8), {static_cast<int64_t>(bytes.size())}, bytes.size())};
  v1::PutPart* part = messages[0].mutable_header()->mutable_part();
  part->set_upload_id(std::string(upload_id));
  part->set_parts(parts);
  part->set_offset(offset);
  part->set_length(length);
  const uint64_t end = offset + length - short_by;
  for (uint64_t at = offset; at < end;) {
    const uint64_t size = std::min<uint64_t>(256 << 10, end - at);
    messages.push_back(ChunkMessage(at, bytes.substr(at, size)));
    at += size;
  }
  return messages;
}

namespace {

// Put and PutPart: the same messages on another method.
using PutMethod = std::unique_ptr<grpc::ClientWriter<v1::PutRequest>> (RawStub::*)(
    grpc::ClientContext*, v1::PutResponse*);

grpc::Status SendPut(RawStub& stub, PutMethod method, const std::vector<v1::PutRequest>& messages,
                     v1::PutResponse* response, bool writes_done, std::string_view bearer_token) {
  std::unique_ptr<grpc::ClientContext> context = RawContext();
  if (!bearer_token.empty()) {
    context->AddMetadata("authorization", "Bearer " + std::string(bearer_token));
  }
  v1::PutResponse ignored;
  std::unique_ptr<grpc::ClientWriter<v1::PutRequest>> writer =
      (stub.*method)(context.get(), response != nullptr ? response : &ignored);
  bool open = true;
  for (const v1::PutRequest& message : messages) {
    // A write fails once the server has answered (with an error).
    if (!writer->Write(message)) {
      open = false;
      break;
    }
  }
  if (open && writes_done) writer->WritesDone();
  if (!writes_done) context->TryCancel();
  return writer->Finish();
}

}  // namespace

grpc::Status RawPut(RawStub& stub, const std::vector<v1::PutRequest>& messages,
                    v1::PutResponse* response, bool writes_done, std::string_view bearer_token) {
  return SendPut(stub, &RawStub::Put, messages, response, writes_done, bearer_token);
}

grpc::Status RawPutPart(RawStub& stub, const std::vector<v1::PutRequest>& messages,
                        v1::PutResponse* response, bool writes_done,
                        std::string_view bearer_token) {
  return SendPut(stub, &RawStub::PutPart, messages, response, writes_done, bearer_token);
}

grpc::Status RawPutBytes(RawStub& stub, std::string_view name, std::string_view bytes,
                         v1::PutResponse* response, size_t chunk_bytes) {
  std::vector<v1::PutRequest> messages = {
      HeaderMessage(name, RawDataType(1, 8), {static_cast<int64_t>(bytes.size())}, bytes.size())};
  for (size_t offset = 0; offset < bytes.size(); offset += chunk_bytes) {
    messages.push_back(ChunkMessage(offset, bytes.substr(offset, chunk_bytes)));
  }
  return RawPut(stub, messages, response);
}

grpc::Status RawFetch(RawStub& stub, const v1::FetchRequest& request, RawFetchResult* result) {
  std::unique_ptr<grpc::ClientContext> context = RawContext();
  std::unique_ptr<grpc::ClientReader<v1::FetchResponse>> reader =
      stub.Fetch(context.get(), request);
  RawFetchResult local;
  RawFetchResult& out = result != nullptr ? *result : local;
  out = RawFetchResult();
  v1::FetchResponse response;
  bool have_header = false;
  uint64_t next_offset = 0;
  while (reader->Read(&response)) {
    if (response.has_header()) {
      EXPECT_FALSE(have_header) << "fetch stream of '" << request.name() << "' sent two headers";
      have_header = true;
      out.header = response.header();
      next_offset = out.header.range().offset();
      if (out.header.has_inline_data()) {
        out.inline_data = true;
        out.bytes = out.header.inline_data();
        next_offset += out.bytes.size();
      }
    } else if (response.has_chunk()) {
      EXPECT_TRUE(have_header) << "fetch stream sent a chunk before its header";
      EXPECT_FALSE(out.inline_data) << "no chunk may follow a header with inline data";
      EXPECT_EQ(response.chunk().offset(), next_offset)
          << "fetch chunks must be in order at absolute offsets";
      EXPECT_FALSE(response.chunk().data().empty()) << "fetch stream sent an empty chunk";
      next_offset = response.chunk().offset() + response.chunk().data().size();
      out.bytes += response.chunk().data();
      out.chunks += 1;
      out.largest_chunk = std::max<uint64_t>(out.largest_chunk, response.chunk().data().size());
    } else {
      ADD_FAILURE() << "fetch stream sent a message with neither header nor chunk";
    }
  }
  grpc::Status status = reader->Finish();
  if (status.ok()) {
    EXPECT_TRUE(have_header) << "a successful fetch stream must start with a header";
    if (out.header.split()) {
      EXPECT_EQ(out.chunks, 0u) << "a split header is the whole stream";
      EXPECT_FALSE(out.inline_data);
    } else {
      EXPECT_EQ(out.bytes.size(), out.header.range().length())
          << "fetch chunks must cover the header's range exactly";
    }
  }
  return status;
}

grpc::Status RawStat(RawStub& stub, std::string_view name, uint64_t version, v1::TensorInfo* info) {
  std::unique_ptr<grpc::ClientContext> context = RawContext();
  v1::StatRequest request;
  request.set_name(std::string(name));
  request.set_version(version);
  v1::StatResponse response;
  grpc::Status status = stub.Stat(context.get(), request, &response);
  if (info != nullptr) *info = response.info();
  return status;
}

std::string AsString(const std::vector<uint8_t>& bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace tensord::testing
