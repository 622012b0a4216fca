// An output file that appears complete or not at all.
#ifndef TENSORD_CLIENT_TENSORCTL_OUTPUT_FILE_H_
#define TENSORD_CLIENT_TENSORCTL_OUTPUT_FILE_H_

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
  OutputFile(std::string path, std::string temporary_path, ScopedFd fd);

  const std::string path_;
  const std::string temporary_path_;  // empty for standard output
  ScopedFd fd_;
  bool committed_ = false;
};

}  // namespace tensord::tensorctl

#endif  // TENSORD_CLIENT_TENSORCTL_OUTPUT_FILE_H_
