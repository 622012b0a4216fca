// What the simulated backend adds to the conformance suite: host-addressable
// device pointers, deferred stream work, capacity accounting, and the CUDA
// rules it enforces so that misuse fails here as it would on a GPU.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/device/device_backend.h"

namespace tensord {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<DeviceAllocation> MustAllocate(DeviceBackend& backend, uint64_t bytes,
                                               HandleKind kind = HandleKind::kLegacyIpc) {
  auto allocation = backend.Allocate(0, bytes, kind);
  EXPECT_TRUE(allocation.ok()) << allocation.status();
  return allocation.ok() ? *std::move(allocation) : nullptr;
}

// A handle as another process would see it: the simulated backend refuses to
// open a legacy handle in its exporting process, so tests in one process
// change the exporter pid (bytes 16..19) to one that is not ours.
ExportedHandle AsIfFromAnotherProcess(const ExportedHandle& handle) {
  ExportedHandle copy;
  copy.kind = handle.kind;
  copy.device = handle.device;
  copy.bytes = handle.bytes;
  uint32_t pid = 1;
  std::memcpy(copy.bytes.data() + 16, &pid, sizeof(pid));
  copy.fd.Reset(::dup(handle.fd.get()));
  copy.offset = handle.offset;
  copy.size = handle.size;
  copy.allocation_size = handle.allocation_size;
  return copy;
}

TEST(SimulatedBackendTest, DevicePointersAreHostAddresses) {
  auto backend = CreateSimulatedBackend();
  auto allocation = MustAllocate(*backend, 4096);
  ASSERT_TRUE(allocation);
  std::memcpy(allocation->data(), "bytes", 5);
  char out[5];
  ASSERT_TRUE(backend->CopyDeviceToHost(out, *allocation, 0, 5, nullptr).ok());
  EXPECT_EQ(std::memcmp(out, "bytes", 5), 0);
}

TEST(SimulatedBackendTest, StreamCopiesRunOnlyWhenSynchronized) {
  auto backend = CreateSimulatedBackend();
  auto allocation = MustAllocate(*backend, 4096);
  ASSERT_TRUE(allocation);
  auto stream = backend->CreateStream(0);
  ASSERT_TRUE(stream.ok());
  const char source[] = "queued";
  ASSERT_TRUE(backend->CopyHostToDevice(*allocation, 0, source, 6, stream->get()).ok());
  // Like a GPU that has not got to it yet: reading before a sync is a bug.
  EXPECT_EQ(static_cast<const char*>(allocation->data())[0], 0);
  ASSERT_TRUE((*stream)->Synchronize().ok());
  EXPECT_EQ(std::memcmp(allocation->data(), "queued", 6), 0);

  // Queued copies run in order; a default-stream copy waits for them.
  ASSERT_TRUE(backend->CopyHostToDevice(*allocation, 0, "AAAA", 4, stream->get()).ok());
  ASSERT_TRUE(backend->CopyHostToDevice(*allocation, 0, "BB", 2, stream->get()).ok());
  char out[4] = {};
  ASSERT_TRUE(backend->CopyDeviceToHost(out, *allocation, 0, 4, nullptr).ok());
  EXPECT_EQ(std::string(out, 4), "BBAA");

  // Destroying a stream lets its work finish (cudaStreamDestroy).
  ASSERT_TRUE(backend->CopyHostToDevice(*allocation, 0, "CC", 2, stream->get()).ok());
  stream->reset();
  EXPECT_EQ(std::memcmp(allocation->data(), "CCAA", 4), 0);
}

TEST(SimulatedBackendTest, FreeingWaitsForQueuedCopies) {
  auto backend = CreateSimulatedBackend();
  auto allocation = MustAllocate(*backend, 4096);
  ASSERT_TRUE(allocation);
  std::memcpy(allocation->data(), "kept", 4);
  auto stream = backend->CreateStream(0);
  ASSERT_TRUE(stream.ok());
  char out[4] = {};
  ASSERT_TRUE(backend->CopyDeviceToHost(out, *allocation, 0, 4, stream->get()).ok());
  allocation.reset();  // cudaFree synchronizes: the queued read is done first
  EXPECT_EQ(std::string(out, 4), "kept");
}

TEST(SimulatedBackendTest, CapacityIsAccountedAndExportsDelayTheFree) {
  SimulatedBackendOptions options;
  options.bytes_per_device = 1 << 20;
  auto backend = CreateSimulatedBackend(options);
  auto too_big = backend->Allocate(0, (1 << 20) + 1, HandleKind::kLegacyIpc);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(too_big.status().message()), HasSubstr("1048577 bytes"));

  auto allocation = MustAllocate(*backend, 100000, HandleKind::kPosixFd);
  ASSERT_TRUE(allocation);
  auto info = backend->GetMemoryInfo(0);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->total_bytes, 1u << 20);
  EXPECT_EQ(info->free_bytes, (1u << 20) - 102400);  // page-rounded

  auto handle = backend->Export(*allocation, HandleKind::kPosixFd);
  ASSERT_TRUE(handle.ok());
  allocation.reset();
  EXPECT_EQ(backend->GetMemoryInfo(0)->free_bytes, (1u << 20) - 102400);
  handle->keepalive.reset();  // the last lease on the export ended
  EXPECT_EQ(backend->GetMemoryInfo(0)->free_bytes, 1u << 20);
}

TEST(SimulatedBackendTest, LegacyHandleOpensOncePerProcess) {
  auto backend = CreateSimulatedBackend();
  auto allocation = MustAllocate(*backend, 8192);
  ASSERT_TRUE(allocation);
  std::memcpy(allocation->data(), "shared", 6);
  auto handle = backend->Export(*allocation, HandleKind::kLegacyIpc);
  ASSERT_TRUE(handle.ok());
  ExportedHandle foreign = AsIfFromAnotherProcess(*handle);

  auto first = backend->Import(foreign);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(std::memcmp((*first)->data(), "shared", 6), 0);
  EXPECT_NE((*first)->data(), allocation->data());  // its own mapping
  auto second = backend->Import(foreign);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("already open in this process"));
  // Another backend instance in the same process is the same process.
  auto other = CreateSimulatedBackend();
  EXPECT_EQ(other->Import(foreign).status().code(), absl::StatusCode::kFailedPrecondition);
  first->reset();
  EXPECT_TRUE(backend->Import(foreign).ok());
}

TEST(SimulatedBackendTest, LegacyHandleNeedsItsOwnMemfd) {
  auto backend = CreateSimulatedBackend();
  auto allocation = MustAllocate(*backend, 8192);
  auto unrelated = MustAllocate(*backend, 8192);
  ASSERT_TRUE(allocation && unrelated);
  auto handle = backend->Export(*allocation, HandleKind::kLegacyIpc);
  auto unrelated_handle = backend->Export(*unrelated, HandleKind::kLegacyIpc);
  ASSERT_TRUE(handle.ok() && unrelated_handle.ok());

  ExportedHandle without_fd = AsIfFromAnotherProcess(*handle);
  without_fd.fd.Reset();
  auto missing = backend->Import(without_fd);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("without its memfd"));

  ExportedHandle wrong_fd = AsIfFromAnotherProcess(*handle);
  wrong_fd.fd.Reset(::dup(unrelated_handle->fd.get()));
  auto mismatch = backend->Import(wrong_fd);
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mismatch.status().message()), HasSubstr("another allocation"));

  ExportedHandle not_simulated = AsIfFromAnotherProcess(*handle);
  not_simulated.bytes[0] = 'X';
  EXPECT_EQ(backend->Import(not_simulated).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SimulatedBackendTest, PosixFdMustBeSimulatedDeviceMemoryOfTheSize) {
  auto backend = CreateSimulatedBackend();
  ExportedHandle handle;
  handle.kind = HandleKind::kPosixFd;
  handle.size = 4096;
  handle.allocation_size = 4096;
  handle.fd.Reset(::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  ASSERT_TRUE(handle.fd.valid());
  ASSERT_EQ(::ftruncate(handle.fd.get(), 8192), 0);
  EXPECT_EQ(backend->Import(handle).status().code(), absl::StatusCode::kInvalidArgument);

  auto allocation = MustAllocate(*backend, 4096, HandleKind::kPosixFd);
  ASSERT_TRUE(allocation);
  auto exported = backend->Export(*allocation, HandleKind::kPosixFd);
  ASSERT_TRUE(exported.ok());
  exported->size = 1 << 20;
  exported->allocation_size = 1 << 20;
  auto too_small = backend->Import(*exported);
  EXPECT_EQ(too_small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_small.status().message()), HasSubstr("1048576 bytes"));
}

TEST(SimulatedBackendTest, PosixFdSupportCanBeSwitchedOff) {
  SimulatedBackendOptions options;
  options.posix_fd_supported = false;
  auto backend = CreateSimulatedBackend(options);
  EXPECT_FALSE(backend->SupportsHandleKind(0, HandleKind::kPosixFd));
  auto allocation = backend->Allocate(0, 4096, HandleKind::kPosixFd);
  EXPECT_EQ(allocation.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(allocation.status().message()), HasSubstr("posix-fd"));
}

TEST(SimulatedBackendTest, ObjectsMayOutliveTheBackend) {
  auto backend = CreateSimulatedBackend();
  auto allocation = MustAllocate(*backend, 4096);
  auto stream = backend->CreateStream(0);
  auto pinned = backend->AllocatePinned(4096);
  ASSERT_TRUE(allocation && stream.ok() && pinned.ok());
  ASSERT_TRUE(backend->CopyHostToDevice(*allocation, 0, "late", 4, stream->get()).ok());
  backend.reset();
  stream->reset();
  EXPECT_EQ(std::memcmp(allocation->data(), "late", 4), 0);
}

}  // namespace
}  // namespace tensord
