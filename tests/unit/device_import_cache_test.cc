// DeviceImportCache: one import per allocation per process, shared and
// refcounted, closed with its last reference; importer failures remembered.
// The exporting "server" is a simulated backend in this process (posix-fd
// handles) or in a forked child (legacy handles, which CUDA's rule forbids
// opening in the exporting process).
#include "client/src/device_import_cache.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "service/common/unix_socket.h"
#include "service/wire/handoff_device_handle.h"

namespace tensord {
namespace {

std::vector<uint8_t> Pattern(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(seed + i * 7);
  return bytes;
}

// A posix-fd export of `bytes` from an allocation of `exporter`.
struct PosixFdExport {
  std::unique_ptr<DeviceAllocation> allocation;
  ExportedHandle handle;
};
PosixFdExport ExportPosixFd(DeviceBackend& exporter, const std::vector<uint8_t>& bytes) {
  PosixFdExport result;
  auto allocation = exporter.Allocate(0, bytes.size(), HandleKind::kPosixFd);
  EXPECT_TRUE(allocation.ok()) << allocation.status();
  if (!allocation.ok()) return result;
  result.allocation = std::move(*allocation);
  EXPECT_TRUE(
      exporter.CopyHostToDevice(*result.allocation, 0, bytes.data(), bytes.size(), nullptr).ok());
  auto handle = exporter.Export(*result.allocation, HandleKind::kPosixFd);
  EXPECT_TRUE(handle.ok()) << handle.status();
  if (handle.ok()) result.handle = std::move(*handle);
  return result;
}

TEST(DeviceImportCacheTest, ImportsAreSharedAndClosedWithTheLastReference) {
  std::unique_ptr<DeviceBackend> server = CreateSimulatedBackend(1);
  const std::vector<uint8_t> bytes = Pattern(10000, 1);
  PosixFdExport exported = ExportPosixFd(*server, bytes);
  ASSERT_TRUE(exported.handle.fd.valid());

  DeviceImportCache cache;
  auto first = cache.Import("server-a", "simulated", exported.handle, "t", 7);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(std::memcmp((*first)->data(), bytes.data(), bytes.size()), 0);
  auto second = cache.Import("server-a", "simulated", exported.handle, "t", 7);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->data(), (*first)->data());
  EXPECT_EQ(cache.imports_opened(), 1u);
  EXPECT_EQ(cache.open_imports(), 1u);

  first->reset();
  EXPECT_EQ(cache.open_imports(), 1u);  // `second` still refers to it
  second->reset();
  EXPECT_EQ(cache.open_imports(), 0u);
  auto third = cache.Import("server-a", "simulated", exported.handle, "t", 7);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(cache.imports_opened(), 2u);  // opened again after it closed
}

TEST(DeviceImportCacheTest, ServersAndAllocationsAreKeptApart) {
  std::unique_ptr<DeviceBackend> server = CreateSimulatedBackend(1);
  PosixFdExport one = ExportPosixFd(*server, Pattern(4096, 2));
  PosixFdExport two = ExportPosixFd(*server, Pattern(4096, 3));
  DeviceImportCache cache;
  auto a = cache.Import("server-a", "simulated", one.handle, "t", 1);
  auto b = cache.Import("server-a", "simulated", two.handle, "t", 2);
  auto c = cache.Import("server-b", "simulated", one.handle, "t", 1);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(cache.open_imports(), 3u);
  EXPECT_EQ(static_cast<const uint8_t*>((*b)->data())[0], 3);
  EXPECT_EQ(static_cast<const uint8_t*>((*a)->data())[0], 2);
}

// The items of an atomic group share one version number.
TEST(DeviceImportCacheTest, TensorsOfOneVersionAreKeptApart) {
  std::unique_ptr<DeviceBackend> server = CreateSimulatedBackend(1);
  PosixFdExport one = ExportPosixFd(*server, Pattern(4096, 5));
  PosixFdExport two = ExportPosixFd(*server, Pattern(4096, 6));
  DeviceImportCache cache;
  auto a = cache.Import("server-a", "simulated", one.handle, "group/a", 9);
  auto b = cache.Import("server-a", "simulated", two.handle, "group/b", 9);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(cache.imports_opened(), 2u);
  EXPECT_EQ(static_cast<const uint8_t*>((*a)->data())[0], 5);
  EXPECT_EQ(static_cast<const uint8_t*>((*b)->data())[0], 6);
}

TEST(DeviceImportCacheTest, ImporterFailureIsRememberedAndNamed) {
  int made = 0;
  DeviceImportCache cache(
      [&made](absl::string_view backend) -> absl::StatusOr<std::unique_ptr<DeviceBackend>> {
        ++made;
        return absl::UnavailableError(absl::StrCat("no importer for ", backend));
      });
  std::unique_ptr<DeviceBackend> server = CreateSimulatedBackend(1);
  PosixFdExport exported = ExportPosixFd(*server, Pattern(64, 4));
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto imported = cache.Import("server", "cuda", exported.handle, "t", 1);
    EXPECT_EQ(imported.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(imported.status().message().find("cuda"), absl::string_view::npos);
  }
  EXPECT_EQ(made, 1);
  EXPECT_EQ(cache.open_imports(), 0u);

  auto unknown = DeviceImportCache::DefaultImporter("opencl");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(unknown.status().message().find("'opencl'"), absl::string_view::npos);
  auto simulated = DeviceImportCache::DefaultImporter("simulated");
  ASSERT_TRUE(simulated.ok()) << simulated.status();
  EXPECT_EQ((*simulated)->device_count(), kSimulatedImporterDevices);
  auto cuda = DeviceImportCache::DefaultImporter("cuda");
  if (!cuda.ok()) {  // no CUDA build, driver or device here
    EXPECT_EQ(cuda.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(cuda.status().message().find("cannot import CUDA IPC handles"),
              absl::string_view::npos)
        << cuda.status();
  }
}

// Forks a child that allocates `bytes` on simulated device 0 as a legacy
// allocation, sends the handle (DeviceHandle proto + memfd) on `socket`, and
// exits once the parent closes its end (`parent_socket`, closed in the child
// so that the parent's close ends the child's wait).
pid_t ExportLegacyFromChild(int socket, int parent_socket, const std::vector<uint8_t>& bytes) {
  const pid_t child = ::fork();
  if (child != 0) return child;
  ::close(parent_socket);
  std::unique_ptr<DeviceBackend> backend = CreateSimulatedBackend(1);
  auto allocation = backend->Allocate(0, bytes.size(), HandleKind::kLegacyIpc);
  if (!allocation.ok()) ::_exit(2);
  if (!backend->CopyHostToDevice(**allocation, 0, bytes.data(), bytes.size(), nullptr).ok()) {
    ::_exit(3);
  }
  auto handle = backend->Export(**allocation, HandleKind::kLegacyIpc);
  if (!handle.ok()) ::_exit(4);
  v1::DeviceHandle proto;
  DeviceHandleToProto(*handle, backend->name(), &proto);
  if (!SendPacket(socket, proto.SerializeAsString(), handle->fd.get()).ok()) ::_exit(5);
  (void)ReceivePacket(socket);  // returns when the parent closes its end
  ::_exit(0);
}

TEST(DeviceImportCacheTest, LegacyHandleOpensOncePerProcessAndIsShared) {
  int sockets[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets), 0);
  ScopedFd parent_end(sockets[0]);
  ScopedFd child_end(sockets[1]);
  const std::vector<uint8_t> bytes = Pattern(20000, 5);
  const pid_t child = ExportLegacyFromChild(child_end.get(), parent_end.get(), bytes);
  ASSERT_GT(child, 0);
  child_end.Reset();
  {
    auto packet = ReceivePacket(parent_end.get());
    ASSERT_TRUE(packet.ok()) << packet.status();
    v1::DeviceHandle proto;
    ASSERT_TRUE(proto.ParseFromString(packet->bytes));
    EXPECT_EQ(proto.backend(), "simulated");
    EXPECT_EQ(proto.kind(), v1::DEVICE_HANDLE_KIND_LEGACY_IPC);
    EXPECT_TRUE(proto.fd_attached());
    auto handle = DeviceHandleFromProto(proto, std::move(packet->fd));
    ASSERT_TRUE(handle.ok()) << handle.status();

    DeviceImportCache cache;
    auto first = cache.Import("child", "simulated", *handle, "t", 1);
    ASSERT_TRUE(first.ok()) << first.status();
    auto second = cache.Import("child", "simulated", *handle, "t", 1);
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ((*first)->data(), (*second)->data());
    EXPECT_EQ(cache.imports_opened(), 1u);
    EXPECT_EQ(std::memcmp((*first)->data(), bytes.data(), bytes.size()), 0);

    // Opening it beside the cache is what CUDA refuses: the cache is needed.
    auto importer = cache.Importer("simulated");
    ASSERT_TRUE(importer.ok());
    auto beside = (*importer)->Import(*handle);
    EXPECT_EQ(beside.status().code(), absl::StatusCode::kFailedPrecondition);
    // Once the cache closed it, it can be opened again.
    first->reset();
    second->reset();
    auto after = (*importer)->Import(*handle);
    EXPECT_TRUE(after.ok()) << after.status();
  }
  parent_end.Reset();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(HandoffDeviceHandleTest, MalformedHandlesAreRefusedByField) {
  std::unique_ptr<DeviceBackend> server = CreateSimulatedBackend(1);
  PosixFdExport exported = ExportPosixFd(*server, Pattern(5000, 6));
  v1::DeviceHandle good;
  DeviceHandleToProto(exported.handle, "simulated", &good);
  EXPECT_EQ(good.kind(), v1::DEVICE_HANDLE_KIND_POSIX_FD);
  EXPECT_EQ(good.size(), 5000u);
  EXPECT_EQ(good.allocation_size(), 8192u);
  auto dup = [&] { return ScopedFd(::dup(exported.handle.fd.get())); };
  ASSERT_TRUE(DeviceHandleFromProto(good, dup()).ok());

  auto refused = [&](v1::DeviceHandle proto, ScopedFd fd, absl::string_view mention) {
    auto handle = DeviceHandleFromProto(proto, std::move(fd));
    EXPECT_EQ(handle.status().code(), absl::StatusCode::kInvalidArgument) << mention;
    EXPECT_NE(handle.status().message().find(mention), absl::string_view::npos) << handle.status();
  };
  refused(good, ScopedFd(), "no fd");
  v1::DeviceHandle bad = good;
  bad.set_kind(static_cast<v1::DeviceHandleKind>(9));
  refused(bad, dup(), "kind 9");
  bad = good;
  bad.set_kind(v1::DEVICE_HANDLE_KIND_LEGACY_IPC);
  bad.set_legacy_ipc_handle("short");
  refused(bad, dup(), "5 bytes");
  bad = good;
  bad.set_size(8192);
  bad.set_offset(1);
  refused(bad, dup(), "offset 1");
  bad = good;
  bad.set_size(0);
  refused(bad, dup(), "0 bytes");
  bad = good;
  bad.set_device(-3);
  refused(bad, dup(), "-3");
}

}  // namespace
}  // namespace tensord
