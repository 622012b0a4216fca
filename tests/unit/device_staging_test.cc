// Pinned double-buffered staging between host bytes and device memory, on
// the simulated backend.
#include "service/transport/device_staging.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace tensord {
namespace {

std::vector<uint8_t> Pattern(size_t size) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(i * 131 + (i >> 8));
  return bytes;
}

TEST(DeviceStagingTest, UploadInUnevenPiecesThenDownloadInChunks) {
  std::unique_ptr<DeviceBackend> backend = CreateSimulatedBackend(2);
  const std::vector<uint8_t> bytes = Pattern(10'000);
  auto allocation = backend->Allocate(1, bytes.size(), HandleKind::kLegacyIpc);
  ASSERT_TRUE(allocation.ok());
  {
    auto upload = DeviceUpload::Create(*backend, **allocation, 1024);
    ASSERT_TRUE(upload.ok()) << upload.status();
    // Pieces smaller than, equal to and larger than a staging buffer.
    size_t offset = 0;
    for (size_t piece : {100u, 1024u, 3000u, 5u}) {
      ASSERT_TRUE((*upload)->Append({bytes.data() + offset, piece}).ok());
      offset += piece;
    }
    ASSERT_TRUE((*upload)->Append({bytes.data() + offset, bytes.size() - offset}).ok());
    ASSERT_TRUE((*upload)->Finish().ok());
  }
  auto download = DeviceDownload::Create(*backend, **allocation, 4096);
  ASSERT_TRUE(download.ok()) << download.status();
  std::vector<uint8_t> out;
  uint64_t queued = 0;
  auto queue_next = [&] {
    const uint64_t size = std::min<uint64_t>(4096, bytes.size() - queued);
    ASSERT_TRUE((*download)->Queue(queued, size).ok());
    queued += size;
  };
  queue_next();
  for (int chunk = 0; chunk < 10 && out.size() < bytes.size(); ++chunk) {
    auto staged = (*download)->Take();
    ASSERT_TRUE(staged.ok()) << staged.status();
    out.insert(out.end(), staged->begin(), staged->end());
    if (queued < bytes.size()) queue_next();
  }
  EXPECT_EQ(out, bytes);
}

TEST(DeviceStagingTest, UploadPastTheEndIsOutOfRange) {
  std::unique_ptr<DeviceBackend> backend = CreateSimulatedBackend(1);
  auto allocation = backend->Allocate(0, 100, HandleKind::kLegacyIpc);
  ASSERT_TRUE(allocation.ok());
  auto upload = DeviceUpload::Create(*backend, **allocation, 64);
  ASSERT_TRUE(upload.ok());
  const std::vector<uint8_t> bytes = Pattern(200);
  absl::Status status = (*upload)->Append(bytes);
  if (status.ok()) status = (*upload)->Finish();
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
}

TEST(DeviceStagingTest, DownloadRefusesAThirdQueuedRange) {
  std::unique_ptr<DeviceBackend> backend = CreateSimulatedBackend(1);
  auto allocation = backend->Allocate(0, 300, HandleKind::kLegacyIpc);
  ASSERT_TRUE(allocation.ok());
  auto download = DeviceDownload::Create(*backend, **allocation, 100);
  ASSERT_TRUE(download.ok());
  ASSERT_TRUE((*download)->Queue(0, 100).ok());
  ASSERT_TRUE((*download)->Queue(100, 100).ok());
  EXPECT_EQ((*download)->Queue(200, 100).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*download)->Take().ok());
}

}  // namespace
}  // namespace tensord
