#include "tests/integration/client_test_support.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tensord::testing {

std::unique_ptr<Client> ConnectClient(const std::string& address, ClientOptions options) {
  options.server = address;
  if (options.timeout == absl::InfiniteDuration()) options.timeout = absl::Seconds(120);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  if (!client.ok()) {
    ADD_FAILURE() << "Client::Connect(" << address << "): " << client.status();
    return nullptr;
  }
  return std::move(*client);
}

ClientOptions RemoteClientOptions(std::string bearer_token) {
  ClientOptions options;
  options.path = TransferPath::kRemote;
  options.bearer_token = std::move(bearer_token);
  return options;
}

std::vector<uint8_t> TensorBytes(const Tensor& tensor) {
  if (tensor.empty()) return {};
  const auto* data = static_cast<const uint8_t*>(tensor.dl_tensor().data);
  return std::vector<uint8_t>(data, data + tensor.data_bytes());
}

void ExpectInfoOfStored(Client& client, const TensorInfo& put) {
  absl::StatusOr<TensorInfo> stored = client.Stat(put.name);
  ASSERT_TRUE(stored.ok()) << put.name << ": " << stored.status();
  EXPECT_EQ(put.version, stored->version) << put.name;
  EXPECT_EQ(put.dtype.code, stored->dtype.code) << put.name;
  EXPECT_EQ(put.dtype.bits, stored->dtype.bits) << put.name;
  EXPECT_EQ(put.dtype.lanes, stored->dtype.lanes) << put.name;
  EXPECT_EQ(put.shape, stored->shape) << put.name;
  EXPECT_EQ(put.strides, stored->strides) << put.name;
  EXPECT_EQ(put.byte_offset, stored->byte_offset) << put.name;
  EXPECT_EQ(put.device.device_type, stored->device.device_type) << put.name;
  EXPECT_EQ(put.device.device_id, stored->device.device_id) << put.name;
  EXPECT_EQ(put.total_bytes, stored->total_bytes) << put.name;
  EXPECT_EQ(put.crc32c, stored->crc32c) << put.name;
  EXPECT_EQ(put.retention, stored->retention) << put.name;
  EXPECT_EQ(put.created, stored->created) << put.name;
}

std::vector<int64_t> StridesOf(const DLTensor& tensor) {
  if (tensor.strides == nullptr) return {};
  return std::vector<int64_t>(tensor.strides, tensor.strides + tensor.ndim);
}

std::vector<int64_t> ShapeOf(const DLTensor& tensor) {
  if (tensor.shape == nullptr) return {};
  return std::vector<int64_t>(tensor.shape, tensor.shape + tensor.ndim);
}

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i] > 1 ? shape[i] : 1;
  }
  return strides;
}

void ExpectServing(Client& client) {
  const std::string name = TestTensorName("still-serving");
  HostTensor tensor = CompactTensor(kU8, {3000}, PatternBytes(3000, 4242));
  absl::StatusOr<TensorInfo> put = client.Put(name, tensor.dl());
  ASSERT_TRUE(put.ok()) << "the server stopped serving puts: " << put.status();
  absl::StatusOr<Tensor> fetched = client.Fetch(name);
  ASSERT_TRUE(fetched.ok()) << "the server stopped serving fetches: " << fetched.status();
  std::vector<uint8_t> bytes = TensorBytes(*fetched);
  EXPECT_TRUE(BytesEqual(bytes.data(), bytes.size(), tensor.storage));
}

::testing::AssertionResult MessageMentions(const absl::Status& status, std::string_view text) {
  auto without_spaces = [](std::string_view in) {
    std::string out;
    for (char c : in) {
      if (c != ' ') out.push_back(c);
    }
    return out;
  };
  const absl::string_view message = status.message();
  if (without_spaces(std::string_view(message.data(), message.size())).find(without_spaces(text)) !=
      std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "status " << status << " does not mention '" << text << "'";
}

}  // namespace tensord::testing
