// --handoff-socket=auto (tensord's default): a per-user runtime directory,
// found by clients through GetServerInfo, so zero-copy needs no flags.
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

namespace fs = std::filesystem;

// Sets (or, with nullptr, unsets) an environment variable for one test and
// restores it afterwards; the server child inherits it.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    had_ = std::getenv(name) != nullptr;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnvironment() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

std::vector<std::string> SocketsIn(const fs::path& directory) {
  std::vector<std::string> names;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory, error)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

// A socket file at `path` whose server is gone: bound, then closed.
void LeaveStaleSocket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0) << path;
  ::close(fd);
}

// A pid that no process has: a child that already exited and was reaped.
pid_t DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

// Puts through a default (kAuto) client and checks it went zero-copy.
void ExpectZeroCopyWithoutFlags(const ServerProcess& server) {
  std::unique_ptr<Client> client = ConnectClient(server.address());
  ASSERT_NE(client, nullptr);
  HostTensor tensor = CompactTensor(kU8, {4096}, PatternBytes(4096, 3));
  DLTensor dl = tensor.dl();
  ASSERT_TRUE(client->Put("auto/handoff", dl).ok());
  EXPECT_TRUE(client->local());
  absl::StatusOr<Tensor> fetched = client->Fetch("auto/handoff");
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_TRUE(BytesEqual(fetched->dl_tensor().data, fetched->data_bytes(), tensor.storage));
}

TEST(HandoffDefaultTest, AutoUsesTheRuntimeDirectoryAndCleansUp) {
  const fs::path runtime = fs::path(::testing::TempDir()) / absl::StrCat("xdg-", ::getpid());
  fs::create_directories(runtime);
  fs::permissions(runtime, fs::perms::owner_all);
  ScopedEnvironment xdg("XDG_RUNTIME_DIR", runtime.c_str());
  const fs::path directory = runtime / "tensord";
  fs::create_directories(directory);
  fs::permissions(directory, fs::perms::owner_all);
  const std::string stale = (directory / absl::StrCat("handoff-", DeadPid(), ".sock")).string();
  LeaveStaleSocket(stale);

  ServerProcessOptions options;
  options.flags = {"--handoff-socket=auto"};
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string expected = absl::StrCat("handoff-", (*server)->pid(), ".sock");
  // The dead server's socket is gone; ours is the only one.
  EXPECT_EQ(SocketsIn(directory), std::vector<std::string>{expected});
  struct stat info;
  ASSERT_EQ(::stat(directory.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  ExpectZeroCopyWithoutFlags(**server);

  ASSERT_TRUE((*server)->Stop().ok());
  EXPECT_TRUE(SocketsIn(directory).empty());
  fs::remove_all(runtime);
}

TEST(HandoffDefaultTest, AutoWithoutARuntimeDirectoryUsesAPrivateTmpDirectory) {
  ScopedEnvironment xdg("XDG_RUNTIME_DIR", nullptr);
  ServerProcessOptions options;
  options.flags = {"--handoff-socket=auto"};
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  // /tmp/tensord-UID when it is private to us, else /tmp/tensord-UID-XXXXXX.
  const std::string name = absl::StrCat("handoff-", (*server)->pid(), ".sock");
  std::string found;
  for (const fs::directory_entry& entry : fs::directory_iterator("/tmp")) {
    const std::string directory = entry.path().filename().string();
    if (directory.rfind(absl::StrCat("tensord-", ::geteuid()), 0) != 0) continue;
    if (fs::exists(entry.path() / name)) found = entry.path().string();
  }
  ASSERT_FALSE(found.empty()) << "no /tmp/tensord-" << ::geteuid() << "*/" << name;
  struct stat info;
  ASSERT_EQ(::lstat(found.c_str(), &info), 0);
  EXPECT_TRUE(S_ISDIR(info.st_mode));
  EXPECT_EQ(info.st_uid, ::geteuid());
  EXPECT_EQ(info.st_mode & 077, 0u);
  ExpectZeroCopyWithoutFlags(**server);
  ASSERT_TRUE((*server)->Stop().ok());
  EXPECT_FALSE(fs::exists(fs::path(found) / name));
}

TEST(HandoffDefaultTest, RuntimeDirectoryTooLongForASocketAddressFallsBackToTmp) {
  // $XDG_RUNTIME_DIR/tensord/handoff-PID.sock would pass sun_path's 107 bytes.
  const fs::path runtime =
      fs::path(::testing::TempDir()) / absl::StrCat("xdg-", ::getpid(), "-", std::string(100, 'r'));
  fs::create_directories(runtime);
  fs::permissions(runtime, fs::perms::owner_all);
  ScopedEnvironment xdg("XDG_RUNTIME_DIR", runtime.c_str());
  ServerProcessOptions options;
  options.flags = {"--handoff-socket=auto"};
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_FALSE(fs::exists(runtime / "tensord")) << "a directory it cannot use was made";
  ExpectZeroCopyWithoutFlags(**server);
  ASSERT_TRUE((*server)->Stop().ok());
  fs::remove_all(runtime);
}

TEST(HandoffDefaultTest, OffAndEmptyTurnHandoffOff) {
  for (const char* flag : {"--handoff-socket=off", "--handoff-socket="}) {
    SCOPED_TRACE(flag);
    ServerProcessOptions options;
    options.flags = {flag};
    absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    std::unique_ptr<Client> client = ConnectClient((*server)->address());
    ASSERT_NE(client, nullptr);
    HostTensor tensor = CompactTensor(kU8, {16}, PatternBytes(16, 5));
    DLTensor dl = tensor.dl();
    ASSERT_TRUE(client->Put("off/handoff", dl).ok());
    EXPECT_FALSE(client->local());
  }
}

}  // namespace
}  // namespace tensord::testing
