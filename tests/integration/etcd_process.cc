#include "tests/integration/etcd_process.h"

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

// A port the kernel just handed out on 127.0.0.1 and that is free again.
// Another process could take it before etcd binds; etcd then fails to start
// and the test says so with etcd's log.
absl::StatusOr<int> FreeLoopbackPort() {
  ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return absl::InternalError(absl::StrCat("bind 127.0.0.1:0: ", std::strerror(errno)));
  }
  return ntohs(address.sin_port);
}

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
  std::unique_ptr<EtcdProcess> etcd(new EtcdProcess());
  etcd->tls_ = std::move(tls);
  etcd->extra_flags_ = std::move(extra_flags);
  std::string temp_dir = absl::StrCat(DataDirBase(), "/tensord-etcd-XXXXXX");
  if (mkdtemp(temp_dir.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
  }
  etcd->temp_dir_ = temp_dir;
  absl::StatusOr<int> client_port = FreeLoopbackPort();
  absl::StatusOr<int> peer_port = FreeLoopbackPort();
  if (!client_port.ok()) return client_port.status();
  if (!peer_port.ok()) return peer_port.status();
  if (*client_port == *peer_port) return absl::InternalError("got the same free port twice");
  etcd->client_port_ = *client_port;
  etcd->peer_port_ = *peer_port;
  if (absl::Status launched = etcd->Launch(ready_timeout); !launched.ok()) return launched;
  return etcd;
}

absl::Status EtcdProcess::Launch(absl::Duration ready_timeout) {
  const std::string client_url = endpoint();
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", peer_port_);
  std::vector<std::string> arguments = {
      kEtcdBinary,
      "--name=tensord-test",
      absl::StrCat("--data-dir=", temp_dir_, "/data"),
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
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  const std::string log_path = temp_dir_ + "/etcd.log";
  ScopedFd log_fd(open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  ScopedFd null_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (log_fd.get() < 0 || null_fd.get() < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", log_path, ": ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test binary
    if (getppid() != parent) _exit(127);
    dup2(null_fd.get(), STDIN_FILENO);
    dup2(log_fd.get(), STDOUT_FILENO);
    dup2(log_fd.get(), STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;
  const absl::Time deadline = absl::Now() + ready_timeout;
  // With TLS, /health needs a client certificate: readiness is a TLS
  // connection that etcd accepts, then a moment for its election (a single
  // member elects itself within a second; the cluster's joins retry).
  auto ready = [&] {
    if (!tls_.has_value()) return Healthy(client_port_);
    ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(client_port_));
    return fd.get() >= 0 &&
           connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  };
  while (!ready()) {
    if (Reap(absl::ZeroDuration())) {
      return absl::FailedPreconditionError(
          absl::StrCat("etcd exited before it was healthy; its log:\n", LogTail()));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("etcd not healthy within ",
                                                      absl::FormatDuration(ready_timeout),
                                                      "; its log:\n", LogTail()));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::OkStatus();
}

EtcdProcess::~EtcdProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    Reap(absl::Seconds(10));
  }
  if (!temp_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(temp_dir_, ignored);
  }
}

bool EtcdProcess::Reap(absl::Duration timeout) {
  if (pid_ <= 0) return true;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t reaped = waitpid(pid_, &status, WNOHANG);
    if (reaped == pid_ || (reaped < 0 && errno == ECHILD)) {
      pid_ = -1;
      return true;
    }
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

void EtcdProcess::Pause() {
  if (pid_ > 0 && !paused_) kill(pid_, SIGSTOP);
  paused_ = true;
}

void EtcdProcess::Resume() {
  if (pid_ > 0 && paused_) kill(pid_, SIGCONT);
  paused_ = false;
}

absl::Status EtcdProcess::Stop(int signal) {
  if (pid_ <= 0) return absl::OkStatus();
  if (paused_ && signal != SIGKILL) kill(pid_, SIGCONT);
  paused_ = false;
  kill(pid_, signal);
  if (!Reap(absl::Seconds(15))) {
    return absl::DeadlineExceededError(absl::StrCat("etcd (pid ", pid_, ") still running"));
  }
  return absl::OkStatus();
}

absl::Status EtcdProcess::Restart(absl::Duration ready_timeout) {
  if (pid_ > 0) return absl::FailedPreconditionError("etcd is still running; Stop it first");
  return Launch(ready_timeout);
}

std::string EtcdProcess::endpoint() const {
  return absl::StrCat(tls_.has_value() ? "https" : "http", "://127.0.0.1:", client_port_);
}

std::string EtcdProcess::LogTail(size_t max_bytes) const {
  std::ifstream in(temp_dir_ + "/etcd.log", std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  std::string log = contents.str();
  return log.size() <= max_bytes ? log : log.substr(log.size() - max_bytes);
}

}  // namespace tensord::testing
