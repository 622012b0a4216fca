#include "tests/process/child_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "service/common/scoped_fd.h"

namespace tensord::testing {
namespace {

// This process's environment with `overlay` ("NAME=VALUE") laid over it.
std::vector<std::string> EnvironmentWith(const std::vector<std::string>& overlay) {
  std::vector<std::string> environment = overlay;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view inherited = *entry;
    const std::string_view name = inherited.substr(0, inherited.find('='));
    const bool replaced = std::any_of(overlay.begin(), overlay.end(), [&](const std::string& set) {
      return set.size() > name.size() && set.starts_with(name) && set[name.size()] == '=';
    });
    if (!replaced) environment.emplace_back(inherited);
  }
  return environment;
}

}  // namespace

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

namespace {

std::string DefaultTempBase() {
  if (const char* tmpdir = std::getenv("TMPDIR");
      tmpdir != nullptr && tmpdir[0] == '/' && std::strlen(tmpdir) < 60) {
    return tmpdir;
  }
  return "/tmp";
}

}  // namespace

TempDir::TempDir() {
  absl::StatusOr<TempDir> made = Create("tensord-test-");
  if (made.ok()) std::swap(path_, made->path_);
}

absl::StatusOr<TempDir> TempDir::Create(const std::string& prefix, std::string base) {
  if (base.empty()) base = DefaultTempBase();
  std::string path = absl::StrCat(base, "/", prefix, "XXXXXX");
  if (mkdtemp(path.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp(", path, "): ", std::strerror(errno)));
  }
  return TempDir(std::move(path));
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::File(absl::string_view name) const { return absl::StrCat(path_, "/", name); }

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(ChildOptions options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("no program to start");
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->program_ = options.argv.front();
  child->log_path_ = options.log_path;
  // Everything the child needs is built before fork(): afterwards it may
  // only make async-signal-safe calls.
  std::vector<char*> argv;
  for (std::string& argument : options.argv) argv.push_back(argument.data());
  argv.push_back(nullptr);
  std::vector<std::string> environment = EnvironmentWith(options.environment);
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const int log_flags = O_WRONLY | O_CREAT | O_CLOEXEC | (options.append_log ? O_APPEND : O_TRUNC);
  ScopedFd log_fd(open(options.log_path.c_str(), log_flags, 0644));
  ScopedFd null_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!log_fd.valid() || !null_fd.valid()) {
    return absl::InternalError(
        absl::StrCat("cannot open ", options.log_path, " or /dev/null: ", std::strerror(errno)));
  }
  const rlimit file_limit{options.open_file_limit, options.open_file_limit};

  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    // Never outlive a crashed test binary or benchmark.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(null_fd.get(), STDIN_FILENO);
    dup2(log_fd.get(), STDOUT_FILENO);
    dup2(log_fd.get(), STDERR_FILENO);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (options.open_file_limit != 0 && setrlimit(RLIMIT_NOFILE, &file_limit) != 0) _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  child->pid_ = pid;
  return child;
}

ChildProcess::~ChildProcess() {
  if (pid_ <= 0 || exited_) return;
  if (paused_) kill(pid_, SIGCONT);
  kill(pid_, SIGTERM);
  if (!Reap(stop_grace)) {
    kill(pid_, SIGKILL);
    Reap(absl::Seconds(10));
  }
}

absl::Status ChildProcess::AwaitReady(const std::function<bool()>& ready, absl::Duration timeout,
                                      absl::Duration poll) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!ready()) {
    if (!Alive()) {
      return absl::FailedPreconditionError(absl::StrCat(
          program_, " ", Describe(), " before it was ready; its output:\n", LogTail()));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(program_, " was not ready within ",
                                                      absl::FormatDuration(timeout),
                                                      "; its output:\n", LogTail()));
    }
    absl::SleepFor(poll);
  }
  return absl::OkStatus();
}

absl::Status ChildProcess::AwaitReadyFile(const std::string& path, absl::Duration timeout) {
  absl::Status ready = AwaitReady(
      [&] {
        struct stat ready_stat;
        return stat(path.c_str(), &ready_stat) == 0;
      },
      timeout);
  if (!ready.ok()) return ready;
  ready_lines_.clear();
  for (absl::string_view line : absl::StrSplit(ReadWholeFile(path), '\n', absl::SkipWhitespace())) {
    ready_lines_.emplace_back(line);
  }
  if (ready_lines_.empty()) {
    return absl::InternalError(absl::StrCat("ready file ", path, " is empty"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::StartWithReadyFile(
    ChildOptions options, const std::string& ready_path, absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = Spawn(std::move(options));
  if (!child.ok()) return child.status();
  if (absl::Status ready = (*child)->AwaitReadyFile(ready_path, timeout); !ready.ok()) {
    return ready;
  }
  return child;
}

bool ChildProcess::Reap(absl::Duration timeout) {
  if (pid_ <= 0 || exited_) return true;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t reaped = waitpid(pid_, &status, WNOHANG);
    if (reaped == pid_ || (reaped < 0 && errno != EINTR)) {
      // reaped < 0: not our child any more (only if someone else reaped it).
      exited_ = true;
      paused_ = false;
      wait_status_ = reaped == pid_ ? status : -1;
      return true;
    }
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

bool ChildProcess::Alive() { return !Reap(absl::ZeroDuration()); }

absl::StatusOr<int> ChildProcess::Stop(int signal, absl::Duration timeout) {
  if (pid_ > 0 && !exited_) {
    if (paused_ && signal != SIGKILL) kill(pid_, SIGCONT);
    kill(pid_, signal);
  }
  paused_ = false;
  return Wait(timeout);
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  if (!Reap(timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(program_, " (pid ", pid_, ") still runs after ",
                                                    absl::FormatDuration(timeout)));
  }
  return wait_status_;
}

namespace {

// The state letter of /proc/PID/stat ('T' once stopped), or 0.
char ProcessState(pid_t pid) {
  const std::string stat = ReadWholeFile(absl::StrCat("/proc/", pid, "/stat"));
  // "PID (COMM) S ...": COMM may hold spaces and parentheses; the state
  // follows the last ')'.
  const size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? 0 : stat[close + 2];
}

}  // namespace

void ChildProcess::Pause() {
  if (pid_ <= 0 || exited_ || paused_) return;
  kill(pid_, SIGSTOP);
  paused_ = true;
  // SIGSTOP takes effect when the kernel next schedules the process: on a
  // loaded machine it can still answer a call sent right after kill().
  // Paused means stopped.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (ProcessState(pid_) != 'T' && ProcessState(pid_) != 't' && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
}

void ChildProcess::Resume() {
  if (pid_ > 0 && !exited_ && paused_) kill(pid_, SIGCONT);
  paused_ = false;
}

std::string ChildProcess::Describe() const {
  if (!exited_) return "running";
  if (WIFEXITED(wait_status_)) return absl::StrCat("exited with code ", WEXITSTATUS(wait_status_));
  if (WIFSIGNALED(wait_status_)) {
    return absl::StrCat("killed by signal ", strsignal(WTERMSIG(wait_status_)));
  }
  return absl::StrCat("wait status ", wait_status_);
}

std::string ChildProcess::Log() const { return ReadWholeFile(log_path_); }

std::string ChildProcess::LogTail(size_t max_bytes) const {
  std::string all = Log();
  if (all.size() <= max_bytes) return all;
  return "..." + all.substr(all.size() - max_bytes);
}

absl::StatusOr<std::vector<int>> FreeLoopbackPorts(int count) {
  std::vector<ScopedFd> held;
  std::vector<int> ports;
  for (int i = 0; i < count; ++i) {
    ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      return absl::InternalError(absl::StrCat("bind 127.0.0.1:0: ", std::strerror(errno)));
    }
    ports.push_back(ntohs(address.sin_port));
    held.push_back(std::move(fd));
  }
  return ports;
}

}  // namespace tensord::testing
