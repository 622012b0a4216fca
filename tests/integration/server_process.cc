#include "tests/integration/server_process.h"

#include <signal.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#ifndef TENSORD_BINARY_PATH
#error "TENSORD_BINARY_PATH must name the tensord binary (set by tests/integration/CMakeLists.txt)"
#endif

namespace tensord::testing {
namespace {

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
  absl::StatusOr<TempDir> temp_dir = TempDir::Create("tensord-it-");
  if (!temp_dir.ok()) return temp_dir.status();
  std::unique_ptr<ServerProcess> server(new ServerProcess(*std::move(temp_dir)));
  const std::string& dir = server->temp_dir_.path();
  const std::string ready_path = dir + "/ready";
  const std::string listen = options.transport == Transport::kTcp
                                 ? "127.0.0.1:0"
                                 : absl::StrCat("unix:", dir, "/tensord.sock");
  std::vector<std::string> arguments = {TENSORD_BINARY_PATH, "--listen=" + listen,
                                        "--ready-file=" + ready_path,
                                        "--log-level=" + options.log_level,
                                        // Tests choose local handoff explicitly (a later
                                        // --handoff-socket in `flags` wins).
                                        "--handoff-socket=off"};
  arguments.insert(arguments.end(), options.flags.begin(), options.flags.end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Spawn({.argv = std::move(arguments),
                           .log_path = dir + "/stderr.log",
                           .environment = options.environment,
                           .open_file_limit = options.open_file_limit});
  if (!child.ok()) return child.status();
  server->child_ = *std::move(child);
  server->child_->stop_grace = absl::Seconds(15);
  if (absl::Status ready = server->child_->AwaitReadyFile(ready_path, options.ready_timeout);
      !ready.ok()) {
    return ready;
  }
  server->addresses_ = server->child_->ready_lines();
  return server;
}

ServerProcess::~ServerProcess() {
  if (child_ == nullptr) return;
  if (!child_->exited() && !child_->Stop(SIGTERM, absl::Seconds(15)).ok()) {
    (void)child_->Stop(SIGKILL, absl::Seconds(10));
  }
  if (CurrentTestFailed()) {
    std::fprintf(stderr, "---- tensord (pid %d, %s) stderr, last part ----\n%s\n----\n",
                 child_->pid(), child_->exited() ? child_->Describe().c_str() : "not reaped",
                 StderrTail().c_str());
  }
}

bool ServerProcess::Alive() { return child_->Alive(); }

absl::StatusOr<int> ServerProcess::Stop(int signal, absl::Duration timeout) {
  return child_->Stop(signal, timeout);
}

absl::StatusOr<int> ServerProcess::Wait(absl::Duration timeout) { return child_->Wait(timeout); }

void ServerProcess::Pause() { child_->Pause(); }

void ServerProcess::Resume() { child_->Resume(); }

std::string ServerProcess::Stderr() const { return child_->Log(); }

std::string ServerProcess::StderrTail(size_t max_bytes) const { return child_->LogTail(max_bytes); }

}  // namespace tensord::testing
