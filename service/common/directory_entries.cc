#include "service/common/directory_entries.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "absl/strings/str_cat.h"
#include "service/common/errno_status.h"

namespace tensord {
namespace {

struct DirectoryCloser {
  void operator()(DIR* directory) const { ::closedir(directory); }
};

}  // namespace

absl::Status ForEachDirectoryEntry(const std::string& path,
                                   absl::FunctionRef<bool(absl::string_view name)> visit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;  // read before StrCat allocates
    return ErrnoStatus(error, absl::StrCat("open(", path, ")"));
  }
  std::unique_ptr<DIR, DirectoryCloser> directory(::fdopendir(fd));
  if (directory == nullptr) {
    const int error = errno;
    ::close(fd);
    return ErrnoStatus(error, absl::StrCat("fdopendir(", path, ")"));
  }
  while (true) {
    errno = 0;  // readdir's end and its failure differ only in errno
    const dirent* entry = ::readdir(directory.get());
    if (entry == nullptr) {
      const int error = errno;
      if (error != 0) return ErrnoStatus(error, absl::StrCat("readdir(", path, ")"));
      return absl::OkStatus();
    }
    const absl::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (!visit(name)) return absl::OkStatus();
  }
}

}  // namespace tensord
