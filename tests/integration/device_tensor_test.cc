// Device tensors through a real tensord with the simulated device backend
// (--device-backend=simulated --simulated-devices=2): remote put into
// cuda:N, fetch back as host bytes, per-device capacity and bad devices.
// The local handoff of device tensors is in device_handoff_test.cc.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/raw_stub.h"

namespace tensord::testing {
namespace {

constexpr uint64_t kServerChunkBytes = 64 * 1024;

PutOptions OnDevice(int device) {
  PutOptions options;
  options.device = DLDevice{kDLCUDA, device};
  options.send_crc32c = true;
  return options;
}

FetchOptions Verified() {
  FetchOptions options;
  options.verify_crc32c = true;
  return options;
}

class DeviceTensorTest : public ClientServerTest<DeviceTensorTest> {
 public:
  static std::vector<std::string> ServerFlags() {
    return {"--device-backend=simulated", "--simulated-devices=2", "--max-device-bytes=8MiB",
            absl::StrCat("--chunk-bytes=", kServerChunkBytes)};
  }
};

TEST_P(DeviceTensorTest, PutAndFetchByteExactOnEachDevice) {
  // Empty, one byte, inline-sized, several fetch chunks, and a size that is
  // a multiple of neither the fetch chunk nor the client's 1 MiB put chunk.
  const std::vector<size_t> sizes = {0, 1, 4096, 3 * kServerChunkBytes, (2u << 20) + 12345};
  for (int device : {0, 1}) {
    for (size_t size : sizes) {
      SCOPED_TRACE(absl::StrCat("cuda:", device, " size ", size));
      const std::string name = TestTensorName(absl::StrCat("d", device, "_", size));
      const std::vector<uint8_t> bytes = PatternBytes(size, size + device);
      HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(size)}, bytes);
      absl::StatusOr<TensorInfo> put = client().Put(name, tensor.dl(), OnDevice(device));
      ASSERT_TRUE(put.ok()) << put.status();
      EXPECT_EQ(put->device.device_type, kDLCUDA);
      EXPECT_EQ(put->device.device_id, device);

      absl::StatusOr<TensorInfo> stat = client().Stat(name);
      ASSERT_TRUE(stat.ok()) << stat.status();
      EXPECT_EQ(stat->device.device_type, kDLCUDA);
      EXPECT_EQ(stat->device.device_id, device);
      EXPECT_EQ(stat->crc32c, put->crc32c);

      absl::StatusOr<Tensor> fetched = client().Fetch(name, Verified());
      ASSERT_TRUE(fetched.ok()) << fetched.status();
      // gRPC hands back host memory; info says where the server holds it.
      EXPECT_EQ(fetched->dl_tensor().device.device_type, kDLCPU);
      EXPECT_EQ(fetched->info().device.device_id, device);
      EXPECT_TRUE(BytesEqual(TensorBytes(*fetched).data(), TensorBytes(*fetched).size(), bytes));
      ASSERT_TRUE(client().Delete(name).ok());
    }
  }
}

TEST_P(DeviceTensorTest, FetchesAByteRangeOfADeviceTensor) {
  const std::string name = TestTensorName("range");
  const std::vector<uint8_t> bytes = PatternBytes(5 * kServerChunkBytes + 7, 3);
  HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(bytes.size())}, bytes);
  ASSERT_TRUE(client().Put(name, tensor.dl(), OnDevice(1)).ok());
  for (uint64_t offset : {uint64_t{0}, uint64_t{5}, kServerChunkBytes - 1}) {
    std::string out;
    const uint64_t length = 2 * kServerChunkBytes + 3;
    ASSERT_TRUE(client().FetchBytes(name, offset, length, out).ok());
    EXPECT_TRUE(BytesEqual(out.data(), out.size(), bytes.data() + offset, length));
  }
  ASSERT_TRUE(client().Delete(name).ok());
}

TEST_P(DeviceTensorTest, CapacityIsPerDeviceAndAFullDevicePublishesNothing) {
  const std::string big = TestTensorName("big");
  const std::string refused = TestTensorName("refused");
  HostTensor six_mib = CompactTensor(kU8, {6 << 20}, PatternBytes(6 << 20, 1));
  HostTensor three_mib = CompactTensor(kU8, {3 << 20}, PatternBytes(3 << 20, 2));
  ASSERT_TRUE(client().Put(big, six_mib.dl(), OnDevice(0)).ok());

  absl::StatusOr<TensorInfo> full = client().Put(refused, three_mib.dl(), OnDevice(0));
  EXPECT_TRUE(StatusIs(full.status(), absl::StatusCode::kResourceExhausted, "cuda:0"));
  EXPECT_TRUE(MessageMentions(full.status(), "--max-device-bytes"));
  EXPECT_TRUE(StatusIs(client().Stat(refused).status(), absl::StatusCode::kNotFound));

  // cuda:1 has its own 8 MiB; host memory is untouched by either.
  absl::StatusOr<TensorInfo> other = client().Put(refused, three_mib.dl(), OnDevice(1));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->device.device_id, 1);
  ASSERT_TRUE(client().Delete(big).ok());
  ASSERT_TRUE(client().Delete(refused).ok());
  // Deleting gave the bytes back.
  ASSERT_TRUE(client().Put(big, six_mib.dl(), OnDevice(0)).ok());
  ASSERT_TRUE(client().Delete(big).ok());
}

TEST_P(DeviceTensorTest, BadDevicesAreRefusedByName) {
  const std::string name = TestTensorName("bad");
  HostTensor tensor = CompactTensor(kU8, {16}, PatternBytes(16, 4));
  EXPECT_TRUE(StatusIs(client().Put(name, tensor.dl(), OnDevice(2)).status(),
                       absl::StatusCode::kInvalidArgument, "cuda:2"));
  EXPECT_TRUE(StatusIs(client().Put(name, tensor.dl(), OnDevice(-1)).status(),
                       absl::StatusCode::kInvalidArgument, "-1"));
  PutOptions opencl;
  opencl.device = DLDevice{kDLOpenCL, 0};
  EXPECT_TRUE(StatusIs(client().Put(name, tensor.dl(), opencl).status(),
                       absl::StatusCode::kFailedPrecondition, "type 4"));
  PutOptions cache = OnDevice(0);
  cache.retention = Retention::kCache;
  EXPECT_TRUE(StatusIs(client().Put(name, tensor.dl(), cache).status(),
                       absl::StatusCode::kInvalidArgument, "never evicted"));
  EXPECT_TRUE(StatusIs(client().Stat(name).status(), absl::StatusCode::kNotFound));
}

TEST_P(DeviceTensorTest, ServerInfoReportsBytesPerDevice) {
  const std::string name = TestTensorName("info");
  HostTensor tensor = CompactTensor(kU8, {1000}, PatternBytes(1000, 5));
  ASSERT_TRUE(client().Put(name, tensor.dl(), OnDevice(1)).ok());
  std::unique_ptr<RawStub> stub = NewRawStub(server().address());
  grpc::ClientContext context;
  v1::GetServerInfoResponse info;
  ASSERT_TRUE(stub->GetServerInfo(&context, v1::GetServerInfoRequest(), &info).ok());
  EXPECT_EQ(info.device_backend(), "simulated");
  ASSERT_EQ(info.devices_size(), 2);
  EXPECT_EQ(info.devices(1).device().type(), kDLCUDA);
  EXPECT_EQ(info.devices(1).device().id(), 1);
  EXPECT_EQ(info.devices(1).bytes_used(), 1000u);
  EXPECT_EQ(info.devices(1).bytes_limit(), uint64_t{8} << 20);
  EXPECT_EQ(info.devices(0).bytes_used(), 0u);
  ASSERT_TRUE(client().Delete(name).ok());
}

INSTANTIATE_TEST_SUITE_P(Transports, DeviceTensorTest, kBothTransports, TransportParamName);

// Servers with other device configurations, one per test.
std::unique_ptr<ServerProcess> StartServer(std::vector<std::string> flags) {
  ServerProcessOptions options;
  options.flags = std::move(flags);
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  if (!server.ok()) {
    ADD_FAILURE() << server.status();
    return nullptr;
  }
  return *std::move(server);
}

TEST(DeviceBackendSelectionTest, ServerWithoutBackendRefusesDevicePuts) {
  std::unique_ptr<ServerProcess> server = StartServer({"--device-backend=none"});
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Client> client = ConnectClient(server->address(), RemoteClientOptions());
  ASSERT_NE(client, nullptr);
  HostTensor tensor = CompactTensor(kU8, {8}, PatternBytes(8, 6));
  EXPECT_TRUE(StatusIs(client->Put(TestTensorName("d"), tensor.dl(), OnDevice(0)).status(),
                       absl::StatusCode::kFailedPrecondition, "no device backend"));
  ExpectServing(*client);
}

TEST(DeviceBackendSelectionTest, DefaultServerStartsAndServesHostTensors) {
  std::unique_ptr<ServerProcess> server = StartServer({});  // --device-backend=auto
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Client> client = ConnectClient(server->address(), RemoteClientOptions());
  ASSERT_NE(client, nullptr);
  ExpectServing(*client);
  if (server->Stderr().find("device_backend_none") == std::string::npos) {
    GTEST_SKIP() << "this host has a CUDA device; auto chose it";
  }
  HostTensor tensor = CompactTensor(kU8, {8}, PatternBytes(8, 7));
  EXPECT_TRUE(StatusIs(client->Put(TestTensorName("d"), tensor.dl(), OnDevice(0)).status(),
                       absl::StatusCode::kFailedPrecondition, "cuda:0"));
}

TEST(DeviceBackendSelectionTest, RealCudaRoundTripWhenAGpuIsPresent) {
  ServerProcessOptions options;
  options.flags = {"--device-backend=cuda", "--chunk-bytes=64KiB"};
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  if (!server.ok()) {
    GTEST_SKIP() << "no CUDA device here: " << server.status().message().substr(0, 300);
  }
  std::unique_ptr<Client> client = ConnectClient((*server)->address(), RemoteClientOptions());
  ASSERT_NE(client, nullptr);
  const std::vector<uint8_t> bytes = PatternBytes((1u << 20) + 999, 8);
  HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(bytes.size())}, bytes);
  const std::string name = TestTensorName("gpu");
  absl::StatusOr<TensorInfo> put = client->Put(name, tensor.dl(), OnDevice(0));
  ASSERT_TRUE(put.ok()) << put.status();
  absl::StatusOr<Tensor> fetched = client->Fetch(name, Verified());
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_TRUE(BytesEqual(TensorBytes(*fetched).data(), TensorBytes(*fetched).size(), bytes));
}

}  // namespace
}  // namespace tensord::testing
