#include "service/common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "service/common/errno_status.h"
#include "service/common/scoped_fd.h"

namespace tensord {
namespace {

// Reads errno before building the message, which may allocate and clobber it.
absl::Status LastError(const char* call, const std::string& path) {
  int err = errno;
  return ErrnoStatus(err, absl::StrCat(call, " ", path));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  // O_NONBLOCK so that opening a FIFO fails fast at the fstat check below
  // instead of blocking until a writer appears; it is a no-op for regular files.
  int raw_fd;
  do {
    raw_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (raw_fd < 0 && errno == EINTR);
  if (raw_fd < 0) return LastError("open", path);
  ScopedFd fd(raw_fd);

  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return LastError("fstat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("map ", path, ": not a regular file"));
  }
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) > std::numeric_limits<size_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("map ", path, ": size ", st.st_size, " does not fit in memory"));
  }
  size_t size = static_cast<size_t>(st.st_size);
  // mmap rejects a zero length, and an empty view needs no mapping.
  if (size == 0) return std::unique_ptr<MappedFile>(new MappedFile(path, nullptr, 0));

  // Shared: the view shows the file's bytes as they are now, also bytes
  // written after the mapping (a pull's memfd read as it fills).
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (data == MAP_FAILED) return LastError("mmap", path);
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (size_ > 0) ::munmap(data_, size_);
}

}  // namespace tensord
