// Device versions in the registry, on the simulated backend: per-device
// capacity, leases, and what the registry refuses.
#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "service/common/crc32c.h"
#include "service/registry/registry.h"

namespace tensord {
namespace {

dlpack::TensorLayout BytesOn(int device, int64_t n) {
  dlpack::TensorLayout layout;
  layout.dtype = DLDataType{dlpack::kUInt, 8, 1};
  layout.shape = {n};
  layout.device = DLDevice{kDLCUDA, device};
  return layout;
}

RegistryOptions TwoDevices(uint64_t max_device_bytes) {
  RegistryOptions options;
  options.device_backend = std::shared_ptr<DeviceBackend>(CreateSimulatedBackend(2));
  options.max_device_bytes = max_device_bytes;
  return options;
}

// Prepares `n` bytes of `fill` on `device` and publishes them.
absl::StatusOr<VersionInfo> PublishOnDevice(Registry& registry, const std::string& name, int device,
                                            int64_t n, uint8_t fill) {
  absl::StatusOr<PendingVersion> pending =
      registry.Prepare(name, BytesOn(device, n), static_cast<uint64_t>(n));
  if (!pending.ok()) return pending.status();
  if (n > 0) {
    std::vector<uint8_t> bytes(n, fill);
    absl::Status copied = registry.device_backend()->CopyHostToDevice(
        *pending->device_memory, 0, bytes.data(), bytes.size(), nullptr);
    if (!copied.ok()) return copied;
  }
  return registry.Publish(*std::move(pending));
}

TEST(RegistryDeviceTest, CapacityIsPerDeviceAndNamesTheDevice) {
  Registry registry(TwoDevices(1000));
  ASSERT_EQ(registry.device_count(), 2);
  ASSERT_TRUE(PublishOnDevice(registry, "a", 0, 600, 1).ok());
  EXPECT_EQ(registry.device_bytes_used(0), 600u);
  EXPECT_EQ(registry.device_bytes_used(1), 0u);
  EXPECT_EQ(registry.host_bytes_used(), 0u);

  absl::StatusOr<VersionInfo> refused = PublishOnDevice(registry, "b", 0, 500, 2);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_NE(refused.status().message().find("cuda:0"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("600 of 1000"), std::string::npos) << refused.status();
  EXPECT_FALSE(registry.Stat("b", 0).ok());  // nothing published
  EXPECT_EQ(registry.device_bytes_used(0), 600u);

  // The other device has its own budget.
  ASSERT_TRUE(PublishOnDevice(registry, "b", 1, 500, 2).ok());
  EXPECT_EQ(registry.device_bytes_used(1), 500u);
  ASSERT_TRUE(registry.Delete("a", 0).ok());
  EXPECT_EQ(registry.device_bytes_used(0), 0u);
}

TEST(RegistryDeviceTest, LeaseKeepsDeletedDeviceVersion) {
  Registry registry(TwoDevices(1 << 20));
  absl::StatusOr<VersionInfo> info = PublishOnDevice(registry, "w", 1, 4096, 7);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->layout.device.device_type, kDLCUDA);
  EXPECT_EQ(info->layout.device.device_id, 1);
  EXPECT_EQ(info->crc32c, Crc32c(std::vector<uint8_t>(4096, 7).data(), 4096));

  absl::StatusOr<Lease> lease = registry.Acquire("w", 0);
  ASSERT_TRUE(lease.ok());
  ASSERT_TRUE(registry.Delete("w", 0).ok());
  // Still held: bytes counted and readable, by version.
  EXPECT_EQ(registry.device_bytes_used(1), 4096u);
  ASSERT_TRUE(registry.Acquire("w", info->version).ok());
  std::vector<uint8_t> out(4096);
  ASSERT_TRUE(registry.device_backend()
                  ->CopyDeviceToHost(out.data(), *(*lease)->device_memory, 0, out.size(), nullptr)
                  .ok());
  EXPECT_EQ(out, std::vector<uint8_t>(4096, 7));
  lease->Reset();
  EXPECT_EQ(registry.device_bytes_used(1), 0u);
}

TEST(RegistryDeviceTest, ZeroBytesNeedNoAllocation) {
  Registry registry(TwoDevices(1000));
  absl::StatusOr<VersionInfo> info = PublishOnDevice(registry, "empty", 0, 0, 0);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->total_bytes, 0u);
  EXPECT_EQ(info->crc32c, 0u);
}

TEST(RegistryDeviceTest, RefusesWhatItCannotHold) {
  Registry host_only{RegistryOptions{}};
  absl::StatusOr<PendingVersion> no_backend = host_only.Prepare("x", BytesOn(0, 8), 8);
  EXPECT_EQ(no_backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(no_backend.status().message().find("cuda:0"), std::string::npos);

  Registry registry(TwoDevices(1000));
  absl::StatusOr<PendingVersion> bad_id = registry.Prepare("x", BytesOn(2, 8), 8);
  EXPECT_EQ(bad_id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_id.status().message().find("cuda:2"), std::string::npos) << bad_id.status();

  absl::StatusOr<PendingVersion> cache = registry.Prepare("x", BytesOn(0, 8), 8, Retention::kCache);
  EXPECT_EQ(cache.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.device_bytes_used(0), 0u);
}

TEST(RegistryDeviceTest, SnapshotsSkipAndStatsCountPerDevice) {
  Registry registry(TwoDevices(1000));
  ASSERT_TRUE(PublishOnDevice(registry, "d", 0, 100, 1).ok());
  EXPECT_TRUE(registry.AcquireDurable().empty());  // device tensors are not snapshotted
  RegistryStats stats = registry.Stats();
  EXPECT_EQ(stats.tensors, 0u);  // host counts
  EXPECT_EQ(stats.stored_bytes, 0u);
  ASSERT_EQ(stats.devices.size(), 2u);
  EXPECT_EQ(stats.devices[0].tensors, 1u);
  EXPECT_EQ(stats.devices[0].stored_bytes, 100u);
  EXPECT_EQ(stats.devices[1].versions, 0u);
}

TEST(RegistryDeviceTest, PublishComputesCrcFromDeviceWhenNotGiven) {
  Registry registry(TwoDevices(uint64_t{64} << 20));
  // Larger than the 4 MiB staging piece, not a multiple of it.
  const int64_t n = (int64_t{9} << 20) + 3;
  absl::StatusOr<VersionInfo> info = PublishOnDevice(registry, "big", 0, n, 9);
  ASSERT_TRUE(info.ok()) << info.status();
  std::vector<uint8_t> expected(n, 9);
  EXPECT_EQ(info->crc32c, Crc32c(expected.data(), expected.size()));
}

}  // namespace
}  // namespace tensord
