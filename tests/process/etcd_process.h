// EtcdProcess: a real single-member etcd (/usr/bin/etcd) on 127.0.0.1 for
// cluster tests and the benchmark's cluster section, in a temporary data
// directory, started and stopped by PID (a ChildProcess).
#ifndef TENSORD_TESTS_PROCESS_ETCD_PROCESS_H_
#define TENSORD_TESTS_PROCESS_ETCD_PROCESS_H_

#include <sys/types.h>

#include <csignal>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/process/child_process.h"

namespace tensord::testing {

inline constexpr char kEtcdBinary[] = "/usr/bin/etcd";
// From etcd-client; used to set up etcd's auth in tests.
inline constexpr char kEtcdctlBinary[] = "/usr/bin/etcdctl";

// Files of etcd's TLS on its client port: its certificate and key, and the
// CA whose client certificates it requires (--client-cert-auth).
struct EtcdTls {
  std::string cert_file;
  std::string key_file;
  std::string client_ca_file;
};

// Not thread-safe; one thread starts, stops and restarts it.
class EtcdProcess {
 public:
  // Whether /usr/bin/etcd exists (tests skip without it).
  static bool Available();

  // Starts etcd on two free loopback ports and waits until it answers
  // (it has elected itself leader). With `tls` the client port speaks
  // https only and requires a client certificate.
  // `extra_flags` go to etcd as they are (e.g. --quota-backend-bytes).
  static absl::StatusOr<std::unique_ptr<EtcdProcess>> Start(
      absl::Duration ready_timeout = absl::Seconds(30), std::optional<EtcdTls> tls = std::nullopt,
      std::vector<std::string> extra_flags = {});

  // SIGKILLs etcd if still running, reaps it, removes the data directory.
  ~EtcdProcess();
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // Sends `signal` to etcd's PID and reaps it (up to 15 s).
  absl::Status Stop(int signal = SIGKILL);
  // True while it runs (false after Stop, or once it exited on its own).
  bool Alive() const { return child_ != nullptr && child_->Alive(); }

  // SIGSTOP / SIGCONT: etcd freezes (connections stay open, nothing
  // answers) and thaws.
  void Pause();
  void Resume();

  // Starts etcd again on the same ports and data directory (after Stop).
  absl::Status Restart(absl::Duration ready_timeout = absl::Seconds(30));

  // "http://127.0.0.1:PORT" ("https://" with TLS)
  std::string endpoint() const;
  pid_t pid() const { return child_ == nullptr ? -1 : child_->pid(); }
  // etcd's data directory (its bbolt file is member/snap/db under it).
  std::string data_dir() const { return temp_dir_.path() + "/data"; }
  // etcd's own log, for failure messages.
  std::string LogTail(size_t max_bytes = 4096) const;

 private:
  explicit EtcdProcess(TempDir temp_dir) : temp_dir_(std::move(temp_dir)) {}
  absl::Status Launch(absl::Duration ready_timeout);

  TempDir temp_dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  std::optional<EtcdTls> tls_;
  std::vector<std::string> extra_flags_;
  std::unique_ptr<ChildProcess> child_;  // null while stopped
};

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_PROCESS_ETCD_PROCESS_H_
