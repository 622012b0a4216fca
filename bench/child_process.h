// The processes the benchmark starts (tensord, the empty-call server) and the
// temporary directory they live in. Each child is stopped by its own pid and
// reaped when its owner goes away; it also dies with the benchmark.
#ifndef TENSORD_BENCH_CHILD_PROCESS_H_
#define TENSORD_BENCH_CHILD_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tensord::bench {

// A fresh directory under $TMPDIR or /tmp (short, so Unix socket paths fit),
// removed with everything in it on destruction.
class TempDir {
 public:
  static absl::StatusOr<TempDir> Create(const std::string& prefix);
  TempDir() = default;
  TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, "")) {}
  TempDir& operator=(TempDir&&) = delete;
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class ChildProcess {
 public:
  // Runs `argv` (argv[0] is the program path) with stdout and stderr going to
  // `log_path`, and waits until `ready_path` exists. The ready file's lines
  // (addresses) are kept. On failure the error carries the log's tail.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& argv,
                                                             const std::string& ready_path,
                                                             const std::string& log_path,
                                                             absl::Duration ready_timeout);
  // The same for a program that writes no ready file (etcd): waits until
  // `ready()` (polled every 50 ms) returns true. ready_lines() stays empty.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> StartWhen(
      const std::vector<std::string>& argv, const std::function<bool()>& ready,
      const std::string& log_path, absl::Duration ready_timeout);
  // SIGTERM, then SIGKILL if it has not exited after 10 s; always reaped.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::vector<std::string>& ready_lines() const { return ready_lines_; }
  // True while it runs (reaps it once it has exited).
  bool Alive();
  std::string LogTail(size_t max_bytes = 4096) const;

 private:
  ChildProcess() = default;
  // fork + exec with stdout and stderr going to `log_path`.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const std::vector<std::string>& argv,
                                                             const std::string& log_path);
  // Polls `ready` every `poll` until it is true; fails (with the log's tail)
  // when the child exits first or `timeout` passes.
  absl::Status AwaitReady(const std::string& program, const std::function<bool()>& ready,
                          absl::Duration timeout, absl::Duration poll);
  bool Reap(absl::Duration timeout);

  pid_t pid_ = -1;
  bool exited_ = false;
  int wait_status_ = 0;
  std::string log_path_;
  std::vector<std::string> ready_lines_;
};

}  // namespace tensord::bench

#endif  // TENSORD_BENCH_CHILD_PROCESS_H_
