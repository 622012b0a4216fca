#include "tests/integration/server_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/common/scoped_fd.h"

#ifndef TENSORD_BINARY_PATH
#error "TENSORD_BINARY_PATH must name the tensord binary (set by tests/integration/CMakeLists.txt)"
#endif

namespace tensord::testing {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(5);

// A short base directory: a Unix socket path must fit in sun_path (108 bytes).
std::string TempBase() {
  const char* tmpdir = std::getenv("TMPDIR");
  if (tmpdir != nullptr && tmpdir[0] == '/' && std::strlen(tmpdir) < 60) return tmpdir;
  return "/tmp";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", strsignal(WTERMSIG(status)));
  return absl::StrCat("wait status ", status);
}

// True when the test (or, in SetUp/TearDownTestSuite, its suite) has failed.
bool CurrentTestFailed() {
  if (::testing::Test::HasFailure()) return true;
  const ::testing::TestSuite* suite = ::testing::UnitTest::GetInstance()->current_test_suite();
  return suite != nullptr &&
         (suite->failed_test_count() > 0 || suite->ad_hoc_test_result().Failed());
}

}  // namespace

std::string TransportName(Transport transport) {
  return transport == Transport::kTcp ? "tcp" : "unix";
}

void PrintTo(Transport transport, std::ostream* out) { *out << TransportName(transport); }

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const ServerProcessOptions& options) {
  std::unique_ptr<ServerProcess> server(new ServerProcess());
  std::string temp_dir = TempBase() + "/tensord-it-XXXXXX";
  if (mkdtemp(temp_dir.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp(", temp_dir, "): ", std::strerror(errno)));
  }
  server->temp_dir_ = temp_dir;
  server->stderr_path_ = temp_dir + "/stderr.log";
  const std::string ready_path = temp_dir + "/ready";
  const std::string listen = options.transport == Transport::kTcp
                                 ? "127.0.0.1:0"
                                 : absl::StrCat("unix:", temp_dir, "/tensord.sock");

  std::vector<std::string> arguments = {TENSORD_BINARY_PATH, "--listen=" + listen,
                                        "--ready-file=" + ready_path,
                                        "--log-level=" + options.log_level,
                                        // Tests choose local handoff explicitly (a later
                                        // --handoff-socket in `flags` wins).
                                        "--handoff-socket=off"};
  arguments.insert(arguments.end(), options.flags.begin(), options.flags.end());
  // Built before fork(): the child may only make async-signal-safe calls.
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  // This process's environment with options.environment laid over it.
  std::vector<std::string> environment = options.environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view inherited = *entry;
    const std::string_view name = inherited.substr(0, inherited.find('='));
    const bool replaced =
        std::any_of(environment.begin(), environment.end(), [&](const std::string& set) {
          return set.size() > name.size() && set.starts_with(name) && set[name.size()] == '=';
        });
    if (!replaced) environment.emplace_back(inherited);
  }
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);

  ScopedFd log_fd(
      open(server->stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  ScopedFd null_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (log_fd.get() < 0 || null_fd.get() < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", server->stderr_path_,
                                            " or /dev/null: ", std::strerror(errno)));
  }

  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    // The server must not outlive a test binary that crashed.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(null_fd.get(), STDIN_FILENO);
    dup2(log_fd.get(), STDOUT_FILENO);
    dup2(log_fd.get(), STDERR_FILENO);
    // The server takes SIGTERM/SIGINT with sigwait: start it with default
    // dispositions and nothing blocked, whatever this process set up.
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (options.open_file_limit != 0) {
      const rlimit limit{options.open_file_limit, options.open_file_limit};
      if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(126);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  server->pid_ = pid;

  const absl::Time deadline = absl::Now() + options.ready_timeout;
  while (true) {
    struct stat ready_stat;
    if (stat(ready_path.c_str(), &ready_stat) == 0) break;
    if (!server->Alive()) {
      return absl::FailedPreconditionError(
          absl::StrCat("tensord ", DescribeWaitStatus(server->wait_status_),
                       " before it was ready; its stderr:\n", server->StderrTail()));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("tensord wrote no ready file within ",
                                                      absl::FormatDuration(options.ready_timeout),
                                                      "; its stderr:\n", server->StderrTail()));
    }
    absl::SleepFor(kPollInterval);
  }
  for (absl::string_view line :
       absl::StrSplit(ReadFile(ready_path), '\n', absl::SkipWhitespace())) {
    server->addresses_.emplace_back(line);
  }
  if (server->addresses_.empty()) {
    return absl::InternalError(absl::StrCat("ready file ", ready_path, " names no address"));
  }
  return server;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !exited_) {
    if (paused_) kill(pid_, SIGCONT);
    kill(pid_, SIGTERM);
    if (!Reap(absl::Seconds(15))) {
      kill(pid_, SIGKILL);
      Reap(absl::Seconds(10));
    }
  }
  if (CurrentTestFailed()) {
    std::fprintf(stderr, "---- tensord (pid %d, %s) stderr, last part ----\n%s\n----\n", pid_,
                 exited_ ? DescribeWaitStatus(wait_status_).c_str() : "not reaped",
                 StderrTail().c_str());
  }
  if (!temp_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(temp_dir_, ignored);
  }
}

bool ServerProcess::Reap(absl::Duration timeout) {
  if (pid_ <= 0 || exited_) return true;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t reaped = waitpid(pid_, &status, WNOHANG);
    if (reaped == pid_) {
      exited_ = true;
      wait_status_ = status;
      return true;
    }
    if (reaped < 0 && errno != EINTR) {
      // Not our child any more (cannot happen unless someone else reaped it).
      exited_ = true;
      wait_status_ = -1;
      return true;
    }
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(kPollInterval);
  }
}

bool ServerProcess::Alive() { return !Reap(absl::ZeroDuration()); }

absl::StatusOr<int> ServerProcess::Stop(int signal, absl::Duration timeout) {
  if (pid_ > 0 && !exited_) {
    if (paused_ && signal != SIGKILL) kill(pid_, SIGCONT);
    kill(pid_, signal);
  }
  paused_ = false;
  return Wait(timeout);
}

void ServerProcess::Pause() {
  if (pid_ > 0 && !exited_ && !paused_) {
    kill(pid_, SIGSTOP);
    paused_ = true;
  }
}

void ServerProcess::Resume() {
  if (pid_ > 0 && !exited_ && paused_) kill(pid_, SIGCONT);
  paused_ = false;
}

absl::StatusOr<int> ServerProcess::Wait(absl::Duration timeout) {
  if (!Reap(timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("tensord (pid ", pid_, ") still runs after ", absl::FormatDuration(timeout)));
  }
  return wait_status_;
}

std::string ServerProcess::Stderr() const { return ReadFile(stderr_path_); }

std::string ServerProcess::StderrTail(size_t max_bytes) const {
  std::string all = Stderr();
  if (all.size() <= max_bytes) return all;
  return "..." + all.substr(all.size() - max_bytes);
}

}  // namespace tensord::testing
