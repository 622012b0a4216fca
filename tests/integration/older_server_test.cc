// The client against a server from before PutPart and FetchInline: an
// in-process gRPC server that has only Put and Fetch answers those two with
// UNIMPLEMENTED, and the client falls back to one Put stream and to the
// streaming Fetch, remembering it.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tensord/client.h"
#include "tensord/v1/tensor_service.grpc.pb.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

// Stores one tensor's bytes: what a Put sent, what a Fetch returns.
class PutAndFetchOnlyService final : public v1::TensorService::Service {
 public:
  grpc::Status Put(grpc::ServerContext*, grpc::ServerReader<v1::PutRequest>* reader,
                   v1::PutResponse* response) override {
    ++puts_;
    v1::PutRequest message;
    v1::PutHeader header;
    std::string bytes;
    while (reader->Read(&message)) {
      if (message.has_header()) header = message.header();
      if (message.has_chunk()) bytes += message.chunk().data();
    }
    if (header.has_part() || bytes.size() != header.total_bytes()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "not a whole put");
    }
    std::lock_guard<std::mutex> lock(mutex_);
    header_ = header;
    bytes_ = std::move(bytes);
    Describe(response->mutable_info());
    return grpc::Status::OK;
  }

  grpc::Status Fetch(grpc::ServerContext*, const v1::FetchRequest*,
                     grpc::ServerWriter<v1::FetchResponse>* writer) override {
    ++fetches_;
    std::lock_guard<std::mutex> lock(mutex_);
    v1::FetchResponse header;
    Describe(header.mutable_header()->mutable_info());
    header.mutable_header()->mutable_range()->set_length(bytes_.size());
    writer->Write(header);
    for (size_t offset = 0; offset < bytes_.size(); offset += 1 << 20) {
      v1::FetchResponse chunk;
      chunk.mutable_chunk()->set_offset(offset);
      chunk.mutable_chunk()->set_data(bytes_.substr(offset, 1 << 20));
      writer->Write(chunk);
    }
    return grpc::Status::OK;
  }

  int puts() const { return puts_; }
  int fetches() const { return fetches_; }

 private:
  void Describe(v1::TensorInfo* info) {
    info->set_name(header_.name());
    info->set_version(1);
    *info->mutable_layout() = header_.layout();
    info->set_total_bytes(bytes_.size());
  }

  std::atomic<int> puts_{0};
  std::atomic<int> fetches_{0};
  std::mutex mutex_;
  v1::PutHeader header_;
  std::string bytes_;
};

TEST(OlderServerTest, APutInPartsAndASmallFetchFallBackToTheCallsItHas) {
  PutAndFetchOnlyService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ClientOptions options = RemoteClientOptions();
  options.server = "127.0.0.1:" + std::to_string(port);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();

  constexpr int64_t kBytes = int64_t{40} << 20;
  const std::vector<uint8_t> bytes = PatternBytes(kBytes, 9);
  HostTensor tensor = CompactTensor(kU8, {kBytes}, bytes);
  PutOptions in_parts;
  in_parts.streams = 2;
  for (int round = 0; round < 2; ++round) {
    absl::StatusOr<TensorInfo> put = (*client)->Put("old/t", tensor.dl(), in_parts);
    ASSERT_TRUE(put.ok()) << put.status();
    EXPECT_EQ(put->total_bytes, static_cast<uint64_t>(kBytes));
  }
  EXPECT_EQ(service.puts(), 2) << "each put reached the server as one Put stream";

  for (int round = 0; round < 2; ++round) {
    absl::StatusOr<Tensor> fetched = (*client)->Fetch("old/t");
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    EXPECT_TRUE(BytesEqual(fetched->dl_tensor().data, fetched->data_bytes(), bytes));
  }
  EXPECT_EQ(service.fetches(), 2);
  server->Shutdown();
}

}  // namespace
}  // namespace tensord::testing
