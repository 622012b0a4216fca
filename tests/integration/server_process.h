// ServerProcess: a real tensord process for integration tests, started on a
// loopback TCP port or a Unix socket and always stopped (and reaped) when the
// object goes away.
#ifndef TENSORD_TESTS_INTEGRATION_SERVER_PROCESS_H_
#define TENSORD_TESTS_INTEGRATION_SERVER_PROCESS_H_

#include <sys/types.h>

#include <csignal>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/process/child_process.h"

namespace tensord::testing {

enum class Transport { kTcp, kUnix };

// "tcp" or "unix", for test names.
std::string TransportName(Transport transport);
// So GoogleTest prints "GetParam() = tcp" rather than raw bytes.
void PrintTo(Transport transport, std::ostream* out);

struct ServerProcessOptions {
  Transport transport = Transport::kTcp;
  // Flags added after --listen and --ready-file, e.g. "--max-host-bytes=1MiB".
  std::vector<std::string> flags;
  std::string log_level = "info";
  // RLIMIT_NOFILE (soft and hard) for the server, as `prlimit --nofile=N:N`
  // would set it; 0 inherits this process's.
  uint64_t open_file_limit = 0;
  // "NAME=VALUE" entries added to (or replacing in) the environment the
  // server inherits, e.g. "TENSORD_LISTEN=unix:/tmp/x.sock".
  std::vector<std::string> environment;
  // How long Start() waits for the ready file.
  absl::Duration ready_timeout = absl::Seconds(20);
};

// Not thread-safe: one thread starts, signals and stops it. Start it from a
// thread that outlives it (the server gets SIGKILL when that thread exits,
// so a crashed test never leaves a server behind).
class ServerProcess {
 public:
  // Starts the tensord binary this test was built with, in a fresh temporary
  // directory, and waits until its ready file appears. On failure (early
  // exit, no ready file in time) the error carries the server's stderr.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(const ServerProcessOptions& options);

  // Stops the server (SIGTERM, then SIGKILL after 15 s) if still running,
  // reaps it, prints its stderr when the current test failed, and removes the
  // temporary directory.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // The first bound address as a gRPC target: "127.0.0.1:PORT" or "unix:PATH".
  const std::string& address() const { return addresses_.front(); }
  const std::vector<std::string>& addresses() const { return addresses_; }
  pid_t pid() const { return child_->pid(); }
  const std::string& temp_dir() const { return temp_dir_.path(); }

  // True while the process has not exited (reaps it when it has).
  bool Alive();

  // Sends `signal` unless the process already exited, waits up to `timeout`
  // for it to exit, and returns its wait status (use WIFEXITED/WEXITSTATUS).
  // DEADLINE_EXCEEDED when it is still running after `timeout` (it is left
  // running; the destructor kills it).
  absl::StatusOr<int> Stop(int signal = SIGTERM, absl::Duration timeout = absl::Seconds(15));

  // Waits up to `timeout` for the process to exit without signalling it.
  absl::StatusOr<int> Wait(absl::Duration timeout);

  // SIGSTOP / SIGCONT: the process freezes (its sockets stay open, nothing
  // answers) and thaws. A paused server is resumed before it is stopped.
  void Pause();
  void Resume();
  bool paused() const { return child_->paused(); }

  // Everything the server wrote to stderr (its log) so far.
  std::string Stderr() const;
  // The last `max_bytes` of it, for failure messages.
  std::string StderrTail(size_t max_bytes = 8192) const;

 private:
  explicit ServerProcess(TempDir temp_dir) : temp_dir_(std::move(temp_dir)) {}

  // Destroyed in reverse: the process (stopped and reaped), then its directory.
  TempDir temp_dir_;
  std::unique_ptr<ChildProcess> child_;
  std::vector<std::string> addresses_;
};

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_INTEGRATION_SERVER_PROCESS_H_
