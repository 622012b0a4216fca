// An output file that appears complete or not at all.
#ifndef TENSORD_CLIENT_TENSORCTL_OUTPUT_FILE_H_
#define TENSORD_CLIENT_TENSORCTL_OUTPUT_FILE_H_

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/common/scoped_fd.h"

namespace tensord::tensorctl {

// Bytes go to a temporary file beside `path`, which Commit() flushes and
// renames over `path`, so readers never see a half-written file. Destroying
// it uncommitted (an error midway) removes the temporary and leaves any
// existing `path` untouched. The path "-" means standard output, written
// directly.
//
// A file is written with O_DIRECT where its file system takes it, in
// aligned blocks staged here (the tail goes through the page cache at
// Commit): a get of 256 MiB then costs the disk's bandwidth, not the
// allocation of 256 MiB of page cache, which on VMs that return freed
// guest memory to the host ran at 0.4 GB/s.
class OutputFile {
 public:
  static absl::StatusOr<std::unique_ptr<OutputFile>> Create(const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  absl::Status Write(std::string_view bytes);
  absl::Status Commit();

  bool is_stdout() const { return path_ == "-"; }
  const std::string& path() const { return path_; }
  // The path for messages: "stdout" for "-".
  std::string_view display_path() const {
    return is_stdout() ? std::string_view("stdout") : std::string_view(path_);
  }

 private:
  OutputFile(std::string path, std::string temporary_path, ScopedFd fd, bool direct);
  // write(2) of all of `bytes`.
  absl::Status WriteAll(std::string_view bytes);
  // Writes the staged block; on a file system that refuses O_DIRECT writes
  // after accepting the flag, goes on buffered.
  absl::Status FlushStaged();
  // Leaves O_DIRECT for what is left (the unaligned tail, or everything).
  absl::Status StopDirect();

  const std::string path_;
  const std::string temporary_path_;  // empty for standard output
  ScopedFd fd_;
  bool committed_ = false;
  bool direct_ = false;  // fd_ has O_DIRECT; bytes go through staged_
  struct FreeAligned {
    void operator()(char* bytes) const { std::free(bytes); }
  };
  std::unique_ptr<char, FreeAligned> staging_;  // kDirectBlockBytes, page aligned
  size_t staged_ = 0;
};

}  // namespace tensord::tensorctl

#endif  // TENSORD_CLIENT_TENSORCTL_OUTPUT_FILE_H_
