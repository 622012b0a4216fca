// Conformance suite for DeviceBackend: the same tests run against the
// simulated backend always and against CUDA where CreateCudaBackend()
// succeeds (a GPU and a driver), skipped otherwise.
#include "service/device/device_backend.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/common/unix_socket.h"

extern char** environ;

namespace tensord {
namespace {

using ::testing::HasSubstr;

constexpr char kChildEnv[] = "TENSORD_DEVICE_TEST_CHILD";
constexpr char kChildTest[] = "DeviceBackendChildProcess.ImportsWhatTheParentExported";

std::vector<uint8_t> Pattern(uint64_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (uint64_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(i * 131 + seed);
  return bytes;
}

struct BackendParam {
  std::string name;
  int device_count;  // simulated only
};
// Stable test names for ctest (the default prints the object's bytes).
void PrintTo(const BackendParam& param, std::ostream* out) {
  *out << param.name << param.device_count;
}

absl::StatusOr<std::unique_ptr<DeviceBackend>> MakeBackend(const std::string& name,
                                                           int device_count) {
  if (name == "cuda") return CreateCudaBackend();
  return CreateSimulatedBackend(device_count);
}

// The handle's fields for the wire of this test; the fd goes as SCM_RIGHTS.
std::string EncodeHandle(const ExportedHandle& handle) {
  return absl::StrCat(static_cast<int>(handle.kind), ":", handle.device, ":", handle.offset, ":",
                      handle.size, ":", handle.allocation_size, ":", handle.bytes);
}

absl::StatusOr<ExportedHandle> DecodeHandle(absl::string_view text, ScopedFd fd) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, absl::MaxSplits(':', 5));
  int kind = 0;
  ExportedHandle handle;
  if (parts.size() != 6 || !absl::SimpleAtoi(parts[0], &kind) ||
      !absl::SimpleAtoi(parts[1], &handle.device) || !absl::SimpleAtoi(parts[2], &handle.offset) ||
      !absl::SimpleAtoi(parts[3], &handle.size) ||
      !absl::SimpleAtoi(parts[4], &handle.allocation_size)) {
    return absl::InvalidArgumentError(absl::StrCat("bad handle message '", text, "'"));
  }
  handle.kind = static_cast<HandleKind>(kind);
  handle.bytes = std::string(parts[5]);
  handle.fd = std::move(fd);
  return handle;
}

class DeviceBackendTest : public ::testing::TestWithParam<BackendParam> {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<DeviceBackend>> backend =
        MakeBackend(GetParam().name, GetParam().device_count);
    if (!backend.ok()) GTEST_SKIP() << "no " << GetParam().name << " backend: " << backend.status();
    backend_ = *std::move(backend);
  }

  std::unique_ptr<DeviceAllocation> MustAllocate(int device, uint64_t bytes,
                                                 HandleKind kind = HandleKind::kLegacyIpc) {
    auto allocation = backend_->Allocate(device, bytes, kind);
    EXPECT_TRUE(allocation.ok()) << allocation.status();
    return allocation.ok() ? *std::move(allocation) : nullptr;
  }

  std::vector<uint8_t> ReadBack(const DeviceMemory& memory, uint64_t offset, uint64_t bytes) {
    std::vector<uint8_t> out(bytes);
    absl::Status status = backend_->CopyDeviceToHost(out.data(), memory, offset, bytes, nullptr);
    EXPECT_TRUE(status.ok()) << status;
    return out;
  }

  void SkipUnlessSupported(HandleKind kind) {
    if (!backend_->SupportsHandleKind(0, kind)) {
      GTEST_SKIP() << backend_->name() << " device 0 has no " << HandleKindName(kind) << " support";
    }
  }

  // Exports `kind`, frees the allocation, sends the handle to a fresh process
  // (fork + exec of this test binary) that imports it, checks the bytes,
  // checks that a second import fails, and writes a marker back.
  void RunChildImport(HandleKind kind);

  std::unique_ptr<DeviceBackend> backend_;
};

TEST_P(DeviceBackendTest, ReportsItself) {
  EXPECT_EQ(backend_->name(), GetParam().name);
  EXPECT_GT(backend_->device_count(), 0);
  EXPECT_TRUE(backend_->SupportsHandleKind(0, HandleKind::kLegacyIpc));
  EXPECT_FALSE(backend_->SupportsHandleKind(backend_->device_count(), HandleKind::kLegacyIpc));
  auto info = backend_->GetMemoryInfo(0);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GT(info->total_bytes, 0u);
  EXPECT_LE(info->free_bytes, info->total_bytes);
}

TEST_P(DeviceBackendTest, CopiesRoundTripWithOffsets) {
  const uint64_t size = (1 << 20) + 13;
  auto first = MustAllocate(0, size);
  auto second = MustAllocate(0, size);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->size(), size);
  EXPECT_EQ(first->device(), 0);
  EXPECT_NE(first->address(), 0u);
  EXPECT_EQ(first->address() % 256, 0u);

  std::vector<uint8_t> pattern = Pattern(5000, 1);
  ASSERT_TRUE(backend_->CopyHostToDevice(*first, 100, pattern.data(), 5000, nullptr).ok());
  EXPECT_EQ(ReadBack(*first, 100, 5000), pattern);
  ASSERT_TRUE(backend_->CopyDeviceToDevice(*second, size - 5000, *first, 100, 5000, nullptr).ok());
  EXPECT_EQ(ReadBack(*second, size - 5000, 5000), pattern);
  // A copy within one allocation, and a zero-byte copy at the very end.
  ASSERT_TRUE(backend_->CopyDeviceToDevice(*first, 9000, *first, 100, 5000, nullptr).ok());
  EXPECT_EQ(ReadBack(*first, 9000, 5000), pattern);
  EXPECT_TRUE(backend_->CopyHostToDevice(*first, size, pattern.data(), 0, nullptr).ok());
}

TEST_P(DeviceBackendTest, CopiesAcrossDevices) {
  if (backend_->device_count() < 2) GTEST_SKIP() << "needs two devices";
  auto on0 = MustAllocate(0, 8192);
  auto on1 = MustAllocate(1, 8192);
  ASSERT_TRUE(on0 && on1);
  EXPECT_EQ(on1->device(), 1);
  std::vector<uint8_t> pattern = Pattern(8192, 2);
  ASSERT_TRUE(backend_->CopyHostToDevice(*on0, 0, pattern.data(), 8192, nullptr).ok());
  auto stream = backend_->CreateStream(1);
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE(backend_->CopyDeviceToDevice(*on1, 0, *on0, 0, 8192, stream->get()).ok());
  ASSERT_TRUE((*stream)->Synchronize().ok());
  EXPECT_EQ(ReadBack(*on1, 0, 8192), pattern);
  // A stream of device 1 cannot copy memory that lives only on device 0.
  absl::Status wrong = backend_->CopyHostToDevice(*on0, 0, pattern.data(), 16, stream->get());
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument) << wrong;
  EXPECT_THAT(std::string(wrong.message()), HasSubstr("stream of device 1"));
}

TEST_P(DeviceBackendTest, StreamsAndPinnedStaging) {
  const uint64_t size = 3 << 20;
  auto allocation = MustAllocate(0, size);
  auto copy = MustAllocate(0, size);
  ASSERT_TRUE(allocation && copy);
  auto upload = backend_->AllocatePinned(size);
  auto download = backend_->AllocatePinned(size);
  ASSERT_TRUE(upload.ok() && download.ok()) << upload.status() << download.status();
  EXPECT_EQ((*upload)->size(), size);
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*upload)->data()) % 4096, 0u);
  std::vector<uint8_t> pattern = Pattern(size, 3);
  std::memcpy((*upload)->data(), pattern.data(), size);

  auto stream = backend_->CreateStream(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ((*stream)->device(), 0);
  DeviceStream* s = stream->get();
  ASSERT_TRUE(backend_->CopyHostToDevice(*allocation, 0, (*upload)->data(), size, s).ok());
  ASSERT_TRUE(backend_->CopyDeviceToDevice(*copy, 0, *allocation, 0, size, s).ok());
  ASSERT_TRUE(backend_->CopyDeviceToHost((*download)->data(), *copy, 0, size, s).ok());
  ASSERT_TRUE((*stream)->Synchronize().ok());
  EXPECT_EQ(std::memcmp((*download)->data(), pattern.data(), size), 0);

  // Device-wide synchronization covers queued work too.
  std::memset((*download)->data(), 0, size);
  ASSERT_TRUE(backend_->CopyDeviceToHost((*download)->data(), *allocation, 0, size, s).ok());
  ASSERT_TRUE(backend_->Synchronize(0).ok());
  EXPECT_EQ(std::memcmp((*download)->data(), pattern.data(), size), 0);
}

TEST_P(DeviceBackendTest, ErrorsNameTheirValues) {
  int count = backend_->device_count();
  auto bad_device = backend_->Allocate(count, 4096, HandleKind::kLegacyIpc);
  EXPECT_EQ(bad_device.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_device.status().message()),
              HasSubstr(absl::StrCat("device ", count)));
  EXPECT_EQ(backend_->Allocate(-1, 4096, HandleKind::kLegacyIpc).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->CreateStream(count).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->Synchronize(count).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->GetMemoryInfo(-3).status().code(), absl::StatusCode::kInvalidArgument);

  auto zero = backend_->Allocate(0, 0, HandleKind::kLegacyIpc);
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(zero.status().message()), HasSubstr("0 bytes"));
  auto huge = backend_->Allocate(0, uint64_t{1} << 62, HandleKind::kLegacyIpc);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_THAT(std::string(huge.status().message()), HasSubstr("4611686018427387904"));
  EXPECT_EQ(backend_->AllocatePinned(0).status().code(), absl::StatusCode::kInvalidArgument);

  auto allocation = MustAllocate(0, 4096);
  ASSERT_TRUE(allocation);
  std::vector<uint8_t> host(8192);
  absl::Status past_end = backend_->CopyHostToDevice(*allocation, 4000, host.data(), 100, nullptr);
  EXPECT_EQ(past_end.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(past_end.message()), HasSubstr("100 bytes at offset 4000"));
  EXPECT_THAT(std::string(past_end.message()), HasSubstr("4096-byte"));
  // Offsets that would overflow are caught, not wrapped.
  EXPECT_EQ(backend_->CopyDeviceToHost(host.data(), *allocation, UINT64_MAX, 2, nullptr).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(backend_->CopyDeviceToDevice(*allocation, 0, *allocation, 1, 4096, nullptr).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(backend_->CopyHostToDevice(*allocation, 0, nullptr, 16, nullptr).code(),
            absl::StatusCode::kInvalidArgument);

  // A stream from another backend instance is refused.
  std::unique_ptr<DeviceBackend> other = CreateSimulatedBackend();
  auto foreign = other->CreateStream(0);
  ASSERT_TRUE(foreign.ok());
  absl::Status wrong = backend_->CopyHostToDevice(*allocation, 0, host.data(), 16, foreign->get());
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument) << wrong;
}

TEST_P(DeviceBackendTest, ExportNeedsTheKindChosenAtAllocate) {
  auto allocation = MustAllocate(0, 4096, HandleKind::kLegacyIpc);
  ASSERT_TRUE(allocation);
  EXPECT_EQ(allocation->exportable_as(), HandleKind::kLegacyIpc);
  auto as_fd = backend_->Export(*allocation, HandleKind::kPosixFd);
  EXPECT_EQ(as_fd.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(as_fd.status().message()), HasSubstr("legacy-ipc"));
  auto legacy = backend_->Export(*allocation, HandleKind::kLegacyIpc);
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  EXPECT_EQ(legacy->kind, HandleKind::kLegacyIpc);
  EXPECT_EQ(legacy->bytes.size(), kLegacyIpcHandleBytes);
  EXPECT_EQ(legacy->size, 4096u);
  EXPECT_GE(legacy->allocation_size, legacy->offset + legacy->size);
  EXPECT_NE(legacy->keepalive, nullptr);
}

TEST_P(DeviceBackendTest, LegacyHandleCannotBeOpenedByItsExporter) {
  auto allocation = MustAllocate(0, 4096, HandleKind::kLegacyIpc);
  ASSERT_TRUE(allocation);
  auto handle = backend_->Export(*allocation, HandleKind::kLegacyIpc);
  ASSERT_TRUE(handle.ok()) << handle.status();
  auto imported = backend_->Import(*handle);
  EXPECT_EQ(imported.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(imported.status().message()), HasSubstr("exported by this process"));
}

TEST_P(DeviceBackendTest, PosixFdImportInTheSameProcessSharesTheBytes) {
  SkipUnlessSupported(HandleKind::kPosixFd);
  const uint64_t size = 100000;
  auto allocation = MustAllocate(0, size, HandleKind::kPosixFd);
  ASSERT_TRUE(allocation);
  std::vector<uint8_t> pattern = Pattern(size, 4);
  ASSERT_TRUE(backend_->CopyHostToDevice(*allocation, 0, pattern.data(), size, nullptr).ok());
  auto handle = backend_->Export(*allocation, HandleKind::kPosixFd);
  ASSERT_TRUE(handle.ok()) << handle.status();
  EXPECT_TRUE(handle->fd.valid());
  EXPECT_EQ(handle->size, size);
  auto imported = backend_->Import(*handle);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ((*imported)->size(), size);
  EXPECT_EQ((*imported)->kind(), HandleKind::kPosixFd);
  EXPECT_NE((*imported)->address(), allocation->address());
  EXPECT_EQ(ReadBack(**imported, 0, size), pattern);
  // Writes through the import land in the allocation.
  uint8_t marker[4] = {9, 8, 7, 6};
  ASSERT_TRUE(backend_->CopyHostToDevice(**imported, 10, marker, 4, nullptr).ok());
  EXPECT_EQ(ReadBack(*allocation, 10, 4), std::vector<uint8_t>(marker, marker + 4));
}

TEST_P(DeviceBackendTest, FreedAllocationLivesWhileItsExportDoes) {
  SkipUnlessSupported(HandleKind::kPosixFd);
  const uint64_t size = 1 << 20;
  auto allocation = MustAllocate(0, size, HandleKind::kPosixFd);
  ASSERT_TRUE(allocation);
  std::vector<uint8_t> pattern = Pattern(size, 5);
  ASSERT_TRUE(backend_->CopyHostToDevice(*allocation, 0, pattern.data(), size, nullptr).ok());
  auto handle = backend_->Export(*allocation, HandleKind::kPosixFd);
  ASSERT_TRUE(handle.ok()) << handle.status();
  allocation.reset();  // the registry dropped the version; a lease still holds the export
  auto imported = backend_->Import(*handle);
  ASSERT_TRUE(imported.ok()) << imported.status();
  EXPECT_EQ(ReadBack(**imported, 0, size), pattern);
}

TEST_P(DeviceBackendTest, ImportRejectsMalformedHandles) {
  ExportedHandle handle;
  handle.kind = HandleKind::kLegacyIpc;
  handle.bytes = std::string(10, 'x');
  handle.size = 4096;
  handle.allocation_size = 4096;
  auto short_bytes = backend_->Import(handle);
  EXPECT_EQ(short_bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(short_bytes.status().message()), HasSubstr("10 bytes"));

  handle.bytes = std::string(kLegacyIpcHandleBytes, 'x');
  handle.offset = 4000;
  handle.size = 200;
  auto outside = backend_->Import(handle);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(outside.status().message()), HasSubstr("200 bytes at offset 4000"));

  handle.offset = 0;
  handle.device = backend_->device_count();
  EXPECT_EQ(backend_->Import(handle).status().code(), absl::StatusCode::kInvalidArgument);

  if (backend_->SupportsHandleKind(0, HandleKind::kPosixFd)) {
    ExportedHandle no_fd;
    no_fd.kind = HandleKind::kPosixFd;
    no_fd.size = 4096;
    no_fd.allocation_size = 4096;
    auto imported = backend_->Import(no_fd);
    EXPECT_EQ(imported.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(imported.status().message()), HasSubstr("no file descriptor"));
  }
}

void DeviceBackendTest::RunChildImport(HandleKind kind) {
  const uint64_t size = (2 << 20) + 100;
  auto allocation = MustAllocate(0, size, kind);
  ASSERT_TRUE(allocation);
  std::vector<uint8_t> pattern = Pattern(size, 6);
  ASSERT_TRUE(backend_->CopyHostToDevice(*allocation, 0, pattern.data(), size, nullptr).ok());
  auto handle = backend_->Export(*allocation, kind);
  ASSERT_TRUE(handle.ok()) << handle.status();
  // The exporter frees its allocation; the export keeps the memory alive.
  allocation.reset();

  int sockets[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets), 0);
  ScopedFd parent_end(sockets[0]);
  ScopedFd child_end(sockets[1]);
  timeval timeout{60, 0};
  ASSERT_EQ(setsockopt(parent_end.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)), 0);

  // Everything the child needs is built before fork(): it only execs.
  std::string self = "/proc/self/exe";
  std::string filter = absl::StrCat("--gtest_filter=", kChildTest);
  std::string env = absl::StrCat(kChildEnv, "=", GetParam().name, ":", GetParam().device_count, ":",
                                 child_end.get());
  std::vector<char*> argv = {self.data(), filter.data(), nullptr};
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, kChildEnv, sizeof(kChildEnv) - 1) != 0) envp.push_back(*e);
  }
  envp.push_back(env.data());
  envp.push_back(nullptr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::fcntl(child_end.get(), F_SETFD, 0);  // inherited across exec
    ::execve(self.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
  child_end.Reset();

  ASSERT_TRUE(SendPacket(parent_end.get(), EncodeHandle(*handle), handle->fd.get()).ok());
  auto reply = ReceivePacket(parent_end.get());
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->bytes, "ok");
  EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) << wait_status;

  // The child wrote a marker through its import: the memory is shared. Read
  // it through an import of our own where CUDA allows one (posix fd).
  if (kind == HandleKind::kPosixFd) {
    auto imported = backend_->Import(*handle);
    ASSERT_TRUE(imported.ok()) << imported.status();
    EXPECT_EQ(ReadBack(**imported, 0, 5), std::vector<uint8_t>({'c', 'h', 'i', 'l', 'd'}));
  }
}

TEST_P(DeviceBackendTest, LegacyHandleImportsInAnotherProcess) {
  RunChildImport(HandleKind::kLegacyIpc);
}

TEST_P(DeviceBackendTest, PosixFdImportsInAnotherProcess) {
  SkipUnlessSupported(HandleKind::kPosixFd);
  RunChildImport(HandleKind::kPosixFd);
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceBackendTest,
                         ::testing::Values(BackendParam{"simulated", 1},
                                           BackendParam{"simulated", 2}, BackendParam{"cuda", 0}),
                         [](const ::testing::TestParamInfo<BackendParam>& info) {
                           return absl::StrCat(info.param.name, info.param.device_count);
                         });

// The child half of RunChildImport: runs only when exec'd by it.
TEST(DeviceBackendChildProcess, ImportsWhatTheParentExported) {
  const char* config = std::getenv(kChildEnv);
  if (config == nullptr) GTEST_SKIP() << "runs only as the child of a cross-process test";
  std::vector<std::string> parts = absl::StrSplit(config, ':');
  ASSERT_EQ(parts.size(), 3u) << config;
  int device_count = 0;
  int socket_fd = -1;
  ASSERT_TRUE(absl::SimpleAtoi(parts[1], &device_count) && absl::SimpleAtoi(parts[2], &socket_fd));
  ScopedFd socket(socket_fd);
  std::string failure;
  auto fail = [&](const std::string& what) {
    if (failure.empty()) failure = what;
    ADD_FAILURE() << what;
  };

  auto backend = MakeBackend(parts[0], device_count);
  auto packet = ReceivePacket(socket.get());
  if (!backend.ok() || !packet.ok()) {
    fail(absl::StrCat("setup: ", backend.status().ToString(), " ", packet.status().ToString()));
  } else if (auto handle = DecodeHandle(packet->bytes, std::move(packet->fd)); !handle.ok()) {
    fail(handle.status().ToString());
  } else {
    auto imported = (*backend)->Import(*handle);
    if (!imported.ok()) {
      fail(absl::StrCat("import: ", imported.status().ToString()));
    } else {
      std::vector<uint8_t> bytes(handle->size);
      absl::Status read =
          (*backend)->CopyDeviceToHost(bytes.data(), **imported, 0, bytes.size(), nullptr);
      if (!read.ok() || bytes != Pattern(handle->size, 6)) {
        fail(absl::StrCat("the imported bytes differ from the parent's: ", read.ToString()));
      }
      if (handle->kind == HandleKind::kLegacyIpc) {
        auto again = (*backend)->Import(*handle);
        if (again.status().code() != absl::StatusCode::kFailedPrecondition) {
          fail(absl::StrCat("second open of a legacy handle: ", again.status().ToString()));
        }
      }
      const char marker[] = "child";
      absl::Status write = (*backend)->CopyHostToDevice(**imported, 0, marker, 5, nullptr);
      if (!write.ok()) fail(absl::StrCat("write: ", write.ToString()));
      imported->reset();
      // Once closed, the handle may be opened again.
      auto reopened = (*backend)->Import(*handle);
      if (!reopened.ok()) fail(absl::StrCat("reopen: ", reopened.status().ToString()));
    }
  }
  ASSERT_TRUE(SendPacket(socket.get(), failure.empty() ? "ok" : failure).ok());
}

TEST(CudaBackendTest, CreateReportsUnavailableOrWorks) {
  auto backend = CreateCudaBackend();
  if (backend.ok()) {
    EXPECT_EQ((*backend)->name(), "cuda");
    EXPECT_GT((*backend)->device_count(), 0);
  } else {
    // No GPU or no driver here (or a build without CUDA): a status, no crash.
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kUnavailable) << backend.status();
    EXPECT_FALSE(backend.status().message().empty());
  }
  // Asking twice is just as safe.
  EXPECT_EQ(CreateCudaBackend().ok(), backend.ok());
}

}  // namespace
}  // namespace tensord
