#include "server/handoff_socket_path.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "service/common/directory_entries.h"
#include "service/common/errno_status.h"

namespace tensord {
namespace {

constexpr char kSocketPrefix[] = "handoff-";
constexpr char kSocketSuffix[] = ".sock";

// A directory of ours that nobody else can enter or write: not a symlink,
// owned by this user, no group or other permissions.
bool IsPrivateDirectory(const std::string& path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode) && info.st_uid == ::geteuid() &&
         (info.st_mode & 077) == 0;
}

// Makes `path` 0700 unless it exists; true when it is then private to us.
bool EnsurePrivateDirectory(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return false;
  return IsPrivateDirectory(path);
}

// Removes handoff-<pid>.sock files whose server is gone.
void RemoveStaleSockets(const std::string& directory) {
  // Best effort: a directory we cannot list leaves its stale sockets.
  (void)ForEachDirectoryEntry(directory, [&](absl::string_view entry_name) {
    absl::string_view pid_text = entry_name;
    if (!absl::ConsumePrefix(&pid_text, kSocketPrefix) ||
        !absl::ConsumeSuffix(&pid_text, kSocketSuffix)) {
      return true;
    }
    int pid = 0;
    if (!absl::SimpleAtoi(pid_text, &pid) || pid <= 0) return true;
    if (::kill(pid, 0) == 0 || errno != ESRCH) return true;  // alive, or not ours to judge
    const std::string path = absl::StrCat(directory, "/", entry_name);
    struct stat info;
    if (::lstat(path.c_str(), &info) == 0 && S_ISSOCK(info.st_mode)) ::unlink(path.c_str());
    return true;
  });
}

// A Unix socket path must fit sockaddr_un::sun_path with its terminator.
constexpr size_t kMaxSocketPathBytes = sizeof(sockaddr_un{}.sun_path) - 1;

std::string SocketIn(const std::string& directory) {
  return absl::StrCat(directory, "/", kSocketPrefix, ::getpid(), kSocketSuffix);
}

// The socket in `directory` when its path fits a sockaddr_un and the
// directory is (made) private to us; nullopt otherwise.
std::optional<HandoffSocketPath> InPrivateDirectory(const std::string& directory) {
  const std::string path = SocketIn(directory);
  if (path.size() > kMaxSocketPathBytes || !EnsurePrivateDirectory(directory)) return std::nullopt;
  RemoveStaleSockets(directory);
  return HandoffSocketPath{.path = path, .private_directory = ""};
}

}  // namespace

absl::StatusOr<HandoffSocketPath> DefaultHandoffSocketPath() {
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR");
      runtime != nullptr && runtime[0] == '/') {
    struct stat info;
    if (::stat(runtime, &info) == 0 && S_ISDIR(info.st_mode) && info.st_uid == ::geteuid()) {
      if (auto chosen = InPrivateDirectory(absl::StrCat(runtime, "/tensord"))) return *chosen;
    }
  }
  const std::string shared_tmp = absl::StrCat("/tmp/tensord-", ::geteuid());
  if (auto chosen = InPrivateDirectory(shared_tmp)) return *chosen;
  // Someone else holds /tmp/tensord-<uid> (or it is not private): a fresh
  // directory of our own.
  std::string unique = absl::StrCat(shared_tmp, "-XXXXXX");
  if (::mkdtemp(unique.data()) == nullptr) {
    return ErrnoStatus(errno, absl::StrCat("mkdtemp ", unique, " for the handoff socket"));
  }
  return HandoffSocketPath{.path = SocketIn(unique), .private_directory = unique};
}

}  // namespace tensord
