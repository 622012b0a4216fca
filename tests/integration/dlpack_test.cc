// DLPack conformance of fetched tensors handed out with release() and
// release_versioned(): what a consumer (PyTorch, NumPy, JAX) relies on. Run
// under ASan, calling each deleter exactly once checks it frees everything.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/client_test_support.h"

namespace tensord::testing {
namespace {

class DlpackTest : public ClientServerTest<DlpackTest> {
 protected:
  // Puts `tensor` under `name` and fetches it back.
  Tensor PutAndFetch(const std::string& name, const HostTensor& tensor) {
    absl::StatusOr<TensorInfo> put = client().Put(name, tensor.dl());
    EXPECT_TRUE(put.ok()) << put.status();
    absl::StatusOr<Tensor> fetched = client().Fetch(name);
    EXPECT_TRUE(fetched.ok()) << fetched.status();
    return fetched.ok() ? std::move(*fetched) : Tensor();
  }
};

// The DLTensor rules tensord promises for a fresh remote fetch.
void ExpectConformingDlTensor(const DLTensor& dl, const HostTensor& expected) {
  EXPECT_EQ(dl.device.device_type, kDLCPU);
  EXPECT_EQ(dl.device.device_id, 0);
  EXPECT_EQ(dl.dtype.code, expected.dtype.code);
  EXPECT_EQ(dl.dtype.bits, expected.dtype.bits);
  EXPECT_EQ(dl.dtype.lanes, expected.dtype.lanes);
  ASSERT_EQ(dl.ndim, static_cast<int32_t>(expected.shape.size()));
  ASSERT_NE(dl.data, nullptr) << "data is never NULL";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(dl.data) % 256, 0u) << "fresh allocations are 256-aligned";
  EXPECT_EQ(dl.byte_offset, 0u);
  if (dl.ndim > 0) {
    ASSERT_NE(dl.shape, nullptr);
    ASSERT_NE(dl.strides, nullptr) << "strides are always filled (DLPack 1.2)";
    EXPECT_EQ(ShapeOf(dl), expected.shape);
    EXPECT_EQ(StridesOf(dl), RowMajorStrides(expected.shape));
  }
  const size_t size = CompactBytes(expected.dtype, expected.shape);
  EXPECT_TRUE(BytesEqual(dl.data, size, expected.storage));
}

TEST_P(DlpackTest, ReleaseGivesALegacyManagedTensor) {
  HostTensor tensor = CompactTensor(kF32, {4, 5}, PatternBytes(80, 1));
  Tensor fetched = PutAndFetch(TestTensorName("t"), tensor);
  ASSERT_FALSE(fetched.empty());
  const void* data = fetched.dl_tensor().data;

  DLManagedTensor* managed = fetched.release();
  ASSERT_NE(managed, nullptr);
  EXPECT_TRUE(fetched.empty()) << "the Tensor is empty after release()";
  EXPECT_EQ(fetched.release(), nullptr) << "a second release hands out nothing";
  EXPECT_EQ(managed->dl_tensor.data, data) << "release hands out the same bytes, no copy";
  ExpectConformingDlTensor(managed->dl_tensor, tensor);
  ASSERT_NE(managed->deleter, nullptr);
  managed->deleter(managed);
}

TEST_P(DlpackTest, ReleaseVersionedGivesADlpack1ManagedTensor) {
  HostTensor tensor =
      CompactTensor(DLDataType{dlpack::kBfloat, 16, 1}, {3, 2, 7}, PatternBytes(84, 2));
  Tensor fetched = PutAndFetch(TestTensorName("t"), tensor);
  ASSERT_FALSE(fetched.empty());

  DLManagedTensorVersioned* managed = fetched.release_versioned();
  ASSERT_NE(managed, nullptr);
  EXPECT_TRUE(fetched.empty());
  EXPECT_EQ(fetched.release_versioned(), nullptr);
  EXPECT_EQ(managed->version.major, 1u);
  EXPECT_GE(managed->version.minor, 0u);
  // A remote fetch is the consumer's private, writable copy.
  EXPECT_NE(managed->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0u);
  EXPECT_EQ(managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0u);
  EXPECT_EQ(managed->flags & ~(DLPACK_FLAG_BITMASK_IS_COPIED | DLPACK_FLAG_BITMASK_READ_ONLY |
                               DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED),
            0u)
      << "no undefined flag bits";
  ExpectConformingDlTensor(managed->dl_tensor, tensor);
  // The consumer may write to a copy.
  std::memset(managed->dl_tensor.data, 0, 84);
  ASSERT_NE(managed->deleter, nullptr);
  managed->deleter(managed);
}

TEST_P(DlpackTest, ZeroSizeAndScalarTensors) {
  HostTensor empty = CompactTensor(kF32, {0, 5}, {});
  Tensor fetched = PutAndFetch(TestTensorName("empty"), empty);
  ASSERT_FALSE(fetched.empty());
  DLManagedTensorVersioned* managed = fetched.release_versioned();
  ASSERT_NE(managed, nullptr);
  ExpectConformingDlTensor(managed->dl_tensor, empty);
  managed->deleter(managed);

  std::vector<uint8_t> one = {0x42, 0, 0, 0};
  HostTensor scalar = CompactTensor(kI32, {}, one);
  fetched = PutAndFetch(TestTensorName("scalar"), scalar);
  ASSERT_FALSE(fetched.empty());
  DLManagedTensor* legacy = fetched.release();
  ASSERT_NE(legacy, nullptr);
  EXPECT_EQ(legacy->dl_tensor.ndim, 0);
  ExpectConformingDlTensor(legacy->dl_tensor, scalar);
  legacy->deleter(legacy);
}

TEST_P(DlpackTest, ManagedTensorOutlivesTheClient) {
  HostTensor tensor = CompactTensor(kU8, {1000}, PatternBytes(1000, 3));
  Tensor fetched = PutAndFetch(TestTensorName("t"), tensor);
  ASSERT_FALSE(fetched.empty());
  DLManagedTensor* managed = fetched.release();
  // Consumers free tensors whenever they like, after the client is gone.
  client_.reset();
  EXPECT_TRUE(BytesEqual(managed->dl_tensor.data, 1000, tensor.storage));
  managed->deleter(managed);
  client_ = ConnectClient(server().address(), RemoteClientOptions());
  ASSERT_NE(client_, nullptr);
}

TEST_P(DlpackTest, MovedTensorKeepsItsBytes) {
  HostTensor tensor = CompactTensor(kU8, {64}, PatternBytes(64, 4));
  Tensor first = PutAndFetch(TestTensorName("t"), tensor);
  ASSERT_FALSE(first.empty());
  const void* data = first.dl_tensor().data;
  Tensor second = std::move(first);
  EXPECT_TRUE(first.empty());  // NOLINT(bugprone-use-after-move): moved-from state is specified
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(second.dl_tensor().data, data);
  Tensor third;
  third = std::move(second);
  EXPECT_TRUE(second.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(BytesEqual(third.dl_tensor().data, third.data_bytes(), tensor.storage));
  // Destroying an unreleased Tensor frees it (checked by ASan/LSan).
}

INSTANTIATE_TEST_SUITE_P(Transports, DlpackTest, kBothTransports, TransportParamName);

}  // namespace
}  // namespace tensord::testing
