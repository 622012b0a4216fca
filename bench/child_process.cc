#include "bench/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "service/common/scoped_fd.h"

namespace tensord::bench {
namespace {

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("was killed by signal ", WTERMSIG(status));
  return absl::StrCat("has wait status ", status);
}

}  // namespace

absl::StatusOr<TempDir> TempDir::Create(const std::string& prefix) {
  std::string base = "/tmp";
  if (const char* tmpdir = std::getenv("TMPDIR");
      tmpdir != nullptr && tmpdir[0] == '/' && std::strlen(tmpdir) < 60) {
    base = tmpdir;
  }
  std::string path = absl::StrCat(base, "/", prefix, "XXXXXX");
  if (mkdtemp(path.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp(", path, "): ", std::strerror(errno)));
  }
  TempDir dir;
  dir.path_ = path;
  return dir;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::vector<std::string>& argv, const std::string& log_path) {
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->log_path_ = log_path;
  // Everything the child needs is built before fork(): afterwards it may
  // only make async-signal-safe calls.
  std::vector<std::string> arguments = argv;
  std::vector<char*> raw;
  for (std::string& argument : arguments) raw.push_back(argument.data());
  raw.push_back(nullptr);
  ScopedFd log_fd(open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  ScopedFd null_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!log_fd.valid() || !null_fd.valid()) {
    return absl::InternalError(absl::StrCat("cannot open ", log_path, ": ", std::strerror(errno)));
  }

  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    // A crashed benchmark must not leave servers behind.
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
    execv(raw[0], raw.data());
    _exit(127);
  }
  child->pid_ = pid;
  return child;
}

absl::Status ChildProcess::AwaitReady(const std::string& program,
                                      const std::function<bool()>& ready, absl::Duration timeout,
                                      absl::Duration poll) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!ready()) {
    if (!Alive()) {
      return absl::FailedPreconditionError(
          absl::StrCat(program, " ", DescribeWaitStatus(wait_status_),
                       " before it was ready; its output:\n", LogTail()));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(program, " was not ready within ",
                                                      absl::FormatDuration(timeout),
                                                      "; its output:\n", LogTail()));
    }
    absl::SleepFor(poll);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, const std::string& ready_path,
    const std::string& log_path, absl::Duration ready_timeout) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = Spawn(argv, log_path);
  if (!child.ok()) return child.status();
  absl::Status ready = (*child)->AwaitReady(
      argv[0],
      [&] {
        struct stat ready_stat;
        return stat(ready_path.c_str(), &ready_stat) == 0;
      },
      ready_timeout, absl::Milliseconds(5));
  if (!ready.ok()) return ready;
  for (absl::string_view line :
       absl::StrSplit(ReadWholeFile(ready_path), '\n', absl::SkipWhitespace())) {
    (*child)->ready_lines_.emplace_back(line);
  }
  if ((*child)->ready_lines_.empty()) {
    return absl::InternalError(absl::StrCat("ready file ", ready_path, " is empty"));
  }
  return child;
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::StartWhen(
    const std::vector<std::string>& argv, const std::function<bool()>& ready,
    const std::string& log_path, absl::Duration ready_timeout) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = Spawn(argv, log_path);
  if (!child.ok()) return child.status();
  absl::Status status = (*child)->AwaitReady(argv[0], ready, ready_timeout, absl::Milliseconds(50));
  if (!status.ok()) return status;
  return child;
}

ChildProcess::~ChildProcess() {
  if (pid_ <= 0 || exited_) return;
  kill(pid_, SIGTERM);
  if (!Reap(absl::Seconds(10))) {
    kill(pid_, SIGKILL);
    Reap(absl::Seconds(10));
  }
}

bool ChildProcess::Reap(absl::Duration timeout) {
  if (pid_ <= 0 || exited_) return true;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t reaped = waitpid(pid_, &status, WNOHANG);
    if (reaped == pid_ || (reaped < 0 && errno != EINTR)) {
      exited_ = true;
      wait_status_ = reaped == pid_ ? status : -1;
      return true;
    }
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

bool ChildProcess::Alive() { return !Reap(absl::ZeroDuration()); }

std::string ChildProcess::LogTail(size_t max_bytes) const {
  std::string all = ReadWholeFile(log_path_);
  if (all.size() <= max_bytes) return all;
  return "..." + all.substr(all.size() - max_bytes);
}

}  // namespace tensord::bench
