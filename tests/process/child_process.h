// The processes tests and the benchmark start (tensord, etcd, the bench's
// own servers): spawned with their output in a log file, never outliving
// the process that started them (PR_SET_PDEATHSIG), signalled and reaped
// by their own pid only, and stopped when their owner goes away. Shared by
// tests/integration (ServerProcess, the cluster harness) and bench/.
#ifndef TENSORD_TESTS_PROCESS_CHILD_PROCESS_H_
#define TENSORD_TESTS_PROCESS_CHILD_PROCESS_H_

#include <sys/types.h>

#include <csignal>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tensord::testing {

// A fresh directory under $TMPDIR or /tmp (short, so Unix socket paths
// fit), removed with everything in it on destruction.
class TempDir {
 public:
  // "tensord-test-XXXXXX"; path() is empty when it could not be made
  // (Create says why).
  TempDir();
  // `prefix` + "XXXXXX" under `base` (default: $TMPDIR or /tmp).
  static absl::StatusOr<TempDir> Create(const std::string& prefix, std::string base = "");
  TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, "")) {}
  TempDir& operator=(TempDir&& other) noexcept {
    std::swap(path_, other.path_);
    return *this;
  }
  ~TempDir();
  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string File(absl::string_view name) const;

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

struct ChildOptions {
  // argv[0] is the program's path.
  std::vector<std::string> argv;
  // stdout and stderr go here; appended to (a restart keeps the old log)
  // when `append_log`.
  std::string log_path;
  bool append_log = false;
  // "NAME=VALUE" entries laid over this process's environment.
  std::vector<std::string> environment;
  // RLIMIT_NOFILE (soft and hard) for the child; 0 inherits this process's.
  uint64_t open_file_limit = 0;
};

// Not thread-safe: one thread starts, signals and stops it.
class ChildProcess {
 public:
  // fork + exec, with default signal dispositions and nothing blocked in the
  // child whatever this process set up (tensord takes its signals with
  // sigwait). The child gets SIGKILL when the thread that started it exits.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(ChildOptions options);
  // Resumed if paused, SIGTERM, then SIGKILL if it has not exited after
  // `stop_grace`; always reaped.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Polls `ready` every `poll` until it is true. FAILED_PRECONDITION when
  // the child exits first, DEADLINE_EXCEEDED after `timeout`; both carry
  // the log's tail.
  absl::Status AwaitReady(const std::function<bool()>& ready, absl::Duration timeout,
                          absl::Duration poll = absl::Milliseconds(5));
  // AwaitReady for the file `path` (tensord's --ready-file), then keeps its
  // non-empty lines (the bound addresses) as ready_lines(); INTERNAL when
  // it has none.
  absl::Status AwaitReadyFile(const std::string& path, absl::Duration timeout);
  const std::vector<std::string>& ready_lines() const { return ready_lines_; }

  // Spawn, then AwaitReadyFile(`ready_path`).
  static absl::StatusOr<std::unique_ptr<ChildProcess>> StartWithReadyFile(
      ChildOptions options, const std::string& ready_path, absl::Duration timeout);

  pid_t pid() const { return pid_; }
  // True while it runs (reaps it once it has exited).
  bool Alive();
  // Sends `signal` unless it already exited (a paused child is resumed
  // first, unless the signal is SIGKILL), waits up to `timeout` and returns
  // its wait status; DEADLINE_EXCEEDED when it still runs (left running).
  absl::StatusOr<int> Stop(int signal = SIGTERM, absl::Duration timeout = absl::Seconds(15));
  // Waits up to `timeout` for it to exit, without signalling it.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  // SIGSTOP / SIGCONT: it freezes (its sockets stay open, nothing answers)
  // and thaws. Pause returns once the process is stopped (/proc says so).
  void Pause();
  void Resume();
  bool paused() const { return paused_; }
  bool exited() const { return exited_; }
  // How it ended ("exited with code 2", "killed by signal Killed"), or
  // "running".
  std::string Describe() const;

  // Its log, and the last `max_bytes` of it for failure messages.
  std::string Log() const;
  std::string LogTail(size_t max_bytes = 8192) const;
  const std::string& log_path() const { return log_path_; }

  absl::Duration stop_grace = absl::Seconds(10);

 private:
  ChildProcess() = default;
  // Polls waitpid until the child exits or `timeout` passes.
  bool Reap(absl::Duration timeout);

  pid_t pid_ = -1;
  bool exited_ = false;
  bool paused_ = false;
  int wait_status_ = 0;
  std::string program_;
  std::string log_path_;
  std::vector<std::string> ready_lines_;
};

// `count` distinct ports the kernel just handed out on 127.0.0.1 and that
// are free again. Every socket stays bound until all are picked: ports
// picked one after another can repeat (a CI run got the same port for
// etcd's client and peer listeners). Another process could take a port
// before the child binds; the child then fails to start, which the caller
// sees with its log.
absl::StatusOr<std::vector<int>> FreeLoopbackPorts(int count);

// The whole file; empty when it cannot be read.
std::string ReadWholeFile(const std::string& path);

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_PROCESS_CHILD_PROCESS_H_
