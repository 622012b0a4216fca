#include "tests/process/etcd_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/common/scoped_fd.h"

namespace tensord::testing {
namespace {

// GET /health on etcd's client port; true when it reports healthy.
bool Healthy(int port) {
  ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return false;
  timeval timeout{.tv_sec = 1, .tv_usec = 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return false;
  const std::string request =
      "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return false;
  }
  std::string response;
  char buffer[1024];
  for (int reads = 0; reads < 16; ++reads) {
    const ssize_t got = recv(fd.get(), buffer, sizeof(buffer), 0);
    if (got <= 0) break;
    response.append(buffer, static_cast<size_t>(got));
  }
  return absl::StrContains(response, "\"health\":\"true\"");
}

// True when something accepts a TCP connection on 127.0.0.1:`port`.
bool PortAccepts(int port) {
  ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  return fd.valid() &&
         connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
}

// Where etcd keeps its data: memory (/dev/shm) when it has room, so a
// test's etcd never waits on a busy disk's fsync (a loaded CI run saw a
// lease grant pass 666 ms); tensord is under test, not etcd's durability.
std::string DataDirBase() {
  constexpr uint64_t kRoomNeeded = uint64_t{2} << 30;  // the million-name test uses ~250 MiB
  struct statvfs shm {};
  if (statvfs("/dev/shm", &shm) == 0 &&
      static_cast<uint64_t>(shm.f_bavail) * shm.f_frsize >= kRoomNeeded &&
      access("/dev/shm", W_OK) == 0) {
    return "/dev/shm";
  }
  return "/tmp";
}

}  // namespace

bool EtcdProcess::Available() { return access(kEtcdBinary, X_OK) == 0; }

absl::StatusOr<std::unique_ptr<EtcdProcess>> EtcdProcess::Start(
    absl::Duration ready_timeout, std::optional<EtcdTls> tls,
    std::vector<std::string> extra_flags) {
  absl::StatusOr<TempDir> temp_dir = TempDir::Create("tensord-etcd-", DataDirBase());
  if (!temp_dir.ok()) return temp_dir.status();
  std::unique_ptr<EtcdProcess> etcd(new EtcdProcess(*std::move(temp_dir)));
  etcd->tls_ = std::move(tls);
  etcd->extra_flags_ = std::move(extra_flags);
  absl::StatusOr<std::vector<int>> ports = FreeLoopbackPorts(2);
  if (!ports.ok()) return ports.status();
  etcd->client_port_ = (*ports)[0];
  etcd->peer_port_ = (*ports)[1];
  if (absl::Status launched = etcd->Launch(ready_timeout); !launched.ok()) return launched;
  return etcd;
}

absl::Status EtcdProcess::Launch(absl::Duration ready_timeout) {
  const std::string client_url = endpoint();
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", peer_port_);
  std::vector<std::string> arguments = {
      kEtcdBinary,
      "--name=tensord-test",
      absl::StrCat("--data-dir=", data_dir()),
      "--listen-client-urls=" + client_url,
      "--advertise-client-urls=" + client_url,
      "--listen-peer-urls=" + peer_url,
      "--initial-advertise-peer-urls=" + peer_url,
      "--initial-cluster=tensord-test=" + peer_url,
      "--initial-cluster-state=new",
      "--log-level=warn",
      // No metrics listener or proxy beyond the client port.
      "--listen-metrics-urls=",
  };
  if (tls_.has_value()) {
    arguments.push_back("--cert-file=" + tls_->cert_file);
    arguments.push_back("--key-file=" + tls_->key_file);
    arguments.push_back("--trusted-ca-file=" + tls_->client_ca_file);
    arguments.push_back("--client-cert-auth");
  }
  for (const std::string& flag : extra_flags_) arguments.push_back(flag);
  // Appended to: a restart keeps the log of the run before it.
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Spawn({.argv = std::move(arguments),
                           .log_path = temp_dir_.path() + "/etcd.log",
                           .append_log = true});
  if (!child.ok()) return child.status();
  child_ = *std::move(child);
  // With TLS, /health needs a client certificate: readiness is a connection
  // that etcd accepts (a single member elects itself within a second; the
  // cluster's joins retry).
  const bool plain = !tls_.has_value();
  const int port = client_port_;
  absl::Status ready =
      child_->AwaitReady([plain, port] { return plain ? Healthy(port) : PortAccepts(port); },
                         ready_timeout, absl::Milliseconds(50));
  if (!ready.ok()) {
    (void)child_->Stop(SIGKILL, absl::Seconds(10));
    child_.reset();
  }
  return ready;
}

EtcdProcess::~EtcdProcess() {
  if (child_ != nullptr) (void)child_->Stop(SIGKILL, absl::Seconds(10));
}

void EtcdProcess::Pause() {
  if (child_ != nullptr) child_->Pause();
}

void EtcdProcess::Resume() {
  if (child_ != nullptr) child_->Resume();
}

absl::Status EtcdProcess::Stop(int signal) {
  if (child_ == nullptr) return absl::OkStatus();
  absl::StatusOr<int> stopped = child_->Stop(signal, absl::Seconds(15));
  if (!stopped.ok()) return stopped.status();
  child_.reset();
  return absl::OkStatus();
}

absl::Status EtcdProcess::Restart(absl::Duration ready_timeout) {
  if (child_ != nullptr)
    return absl::FailedPreconditionError("etcd is still running; Stop it first");
  return Launch(ready_timeout);
}

std::string EtcdProcess::endpoint() const {
  return absl::StrCat(tls_.has_value() ? "https" : "http", "://127.0.0.1:", client_port_);
}

std::string EtcdProcess::LogTail(size_t max_bytes) const {
  std::string log = ReadWholeFile(temp_dir_.path() + "/etcd.log");
  return log.size() <= max_bytes ? log : log.substr(log.size() - max_bytes);
}

}  // namespace tensord::testing
