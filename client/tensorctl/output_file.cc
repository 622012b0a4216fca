#include "client/tensorctl/output_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "service/common/absl_view.h"
#include "service/common/errno_status.h"
#include "service/common/status_macros.h"

namespace tensord::tensorctl {
namespace {

// O_DIRECT writes are whole blocks of this size, at offsets that are
// multiples of it (any file system's logical block size divides it).
constexpr size_t kDirectBlockBytes = size_t{4} << 20;
constexpr size_t kDirectAlignment = 4096;

}  // namespace

absl::StatusOr<std::unique_ptr<OutputFile>> OutputFile::Create(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("output path is empty");
  if (path == "-") {
    // A duplicate, so that closing ours leaves the process's stdout open.
    ScopedFd fd(::dup(STDOUT_FILENO));
    if (!fd.valid()) return ErrnoStatus(errno, "dup stdout");
    return std::unique_ptr<OutputFile>(new OutputFile(path, "", std::move(fd), /*direct=*/false));
  }
  // Beside the destination so that rename() stays within one file system;
  // O_EXCL with the pid keeps two concurrent tensorctl runs apart. Mode 0666
  // is narrowed by the umask like any newly created file.
  std::string temporary_path = absl::StrCat(path, ".tmp.", ::getpid());
  ScopedFd fd(::open(temporary_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  // The error names the user's path; the temporary name would only confuse.
  if (!fd.valid()) return ErrnoStatus(errno, absl::StrCat("create ", path));
  // Set after creating, so a file system without O_DIRECT (EINVAL) only
  // means buffered writes.
  const int flags = ::fcntl(fd.get(), F_GETFL);
  const bool direct = flags >= 0 && ::fcntl(fd.get(), F_SETFL, flags | O_DIRECT) == 0;
  return std::unique_ptr<OutputFile>(
      new OutputFile(path, std::move(temporary_path), std::move(fd), direct));
}

OutputFile::OutputFile(std::string path, std::string temporary_path, ScopedFd fd, bool direct)
    : path_(std::move(path)),
      temporary_path_(std::move(temporary_path)),
      fd_(std::move(fd)),
      direct_(direct) {
  if (direct_) {
    staging_.reset(static_cast<char*>(std::aligned_alloc(kDirectAlignment, kDirectBlockBytes)));
    // Without a staging block, every write goes buffered.
    if (staging_ == nullptr) (void)StopDirect();
  }
}

OutputFile::~OutputFile() {
  if (!committed_ && !temporary_path_.empty()) ::unlink(temporary_path_.c_str());
}

absl::Status OutputFile::Write(std::string_view bytes) {
  if (committed_) return absl::FailedPreconditionError(absl::StrCat(path_, " is already written"));
  while (direct_ && !bytes.empty()) {
    const size_t take = std::min(bytes.size(), kDirectBlockBytes - staged_);
    std::memcpy(staging_.get() + staged_, bytes.data(), take);
    staged_ += take;
    bytes.remove_prefix(take);
    if (staged_ == kDirectBlockBytes) TENSORD_RETURN_IF_ERROR(FlushStaged());
  }
  return WriteAll(bytes);
}

absl::Status OutputFile::FlushStaged() {
  std::string_view block(staging_.get(), staged_);
  if (direct_ && staged_ == kDirectBlockBytes) {
    const ssize_t written = ::write(fd_.get(), block.data(), block.size());
    if (written == static_cast<ssize_t>(block.size())) {
      staged_ = 0;
      return absl::OkStatus();
    }
    if (written > 0) {
      block.remove_prefix(static_cast<size_t>(written));
    } else if (errno != EINVAL && errno != EINTR) {
      return ErrnoStatus(errno, absl::StrCat("write ", AsAbsl(display_path())));
    }
    // A file system that took the flag but not this write: buffered from here.
  }
  TENSORD_RETURN_IF_ERROR(StopDirect());
  staged_ = 0;
  return WriteAll(block);
}

absl::Status OutputFile::StopDirect() {
  direct_ = false;
  const int flags = ::fcntl(fd_.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd_.get(), F_SETFL, flags & ~O_DIRECT) != 0) {
    return ErrnoStatus(errno, absl::StrCat("fcntl ", AsAbsl(display_path())));
  }
  return absl::OkStatus();
}

absl::Status OutputFile::WriteAll(std::string_view bytes) {
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
  if (direct_) TENSORD_RETURN_IF_ERROR(FlushStaged());  // the unaligned tail, buffered
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
