#include "client/tensorctl/output_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "service/common/absl_view.h"
#include "service/common/errno_status.h"

namespace tensord::tensorctl {

absl::StatusOr<std::unique_ptr<OutputFile>> OutputFile::Create(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("output path is empty");
  if (path == "-") {
    // A duplicate, so that closing ours leaves the process's stdout open.
    ScopedFd fd(::dup(STDOUT_FILENO));
    if (!fd.valid()) return ErrnoStatus(errno, "dup stdout");
    return std::unique_ptr<OutputFile>(new OutputFile(path, "", std::move(fd)));
  }
  // Beside the destination so that rename() stays within one file system;
  // O_EXCL with the pid keeps two concurrent tensorctl runs apart. Mode 0666
  // is narrowed by the umask like any newly created file.
  std::string temporary_path = absl::StrCat(path, ".tmp.", ::getpid());
  ScopedFd fd(::open(temporary_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  // The error names the user's path; the temporary name would only confuse.
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("create ", path));
  return std::unique_ptr<OutputFile>(
      new OutputFile(path, std::move(temporary_path), std::move(fd)));
}

OutputFile::OutputFile(std::string path, std::string temporary_path, ScopedFd fd)
    : path_(std::move(path)), temporary_path_(std::move(temporary_path)), fd_(std::move(fd)) {}

OutputFile::~OutputFile() {
  if (!committed_ && !temporary_path_.empty()) ::unlink(temporary_path_.c_str());
}

absl::Status OutputFile::Write(std::string_view bytes) {
  if (committed_) return absl::FailedPreconditionError(absl::StrCat(path_, " is already written"));
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd_.get(), bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat("write ", AsAbsl(display_path())));
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  return absl::OkStatus();
}

absl::Status OutputFile::Commit() {
  if (committed_) return absl::OkStatus();
  if (!is_stdout()) {
    // Data reaches the disk before the rename makes it visible; otherwise a
    // crash could leave an empty file under the final name.
    if (::fsync(fd_.get()) != 0) return ErrnoStatus(errno, absl::StrCat("fsync ", path_));
  }
  const int fd = fd_.Release();
  if (::close(fd) != 0) return ErrnoStatus(errno, absl::StrCat("close ", path_));
  if (!is_stdout() && ::rename(temporary_path_.c_str(), path_.c_str()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("rename ", temporary_path_, " to ", path_));
  }
  committed_ = true;
  return absl::OkStatus();
}

}  // namespace tensord::tensorctl
