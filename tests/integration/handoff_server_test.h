// A test fixture base for tests against a real tensord with a handoff
// socket: starts it (restartable with other flags), and holds one local
// (handoff) and one remote (gRPC) Client to it.
#ifndef TENSORD_TESTS_INTEGRATION_HANDOFF_SERVER_TEST_H_
#define TENSORD_TESTS_INTEGRATION_HANDOFF_SERVER_TEST_H_

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/server_process.h"

namespace tensord::testing {

// `TestBase` is ::testing::Test or a ::testing::TestWithParam<T>.
template <typename TestBase>
class HandoffServerTest : public TestBase {
 protected:
  // (Re)starts the server with a fresh handoff socket and `flags`, and
  // connects local_ and remote_.
  void StartServerWith(std::vector<std::string> flags) {
    local_.reset();
    remote_.reset();
    server_.reset();
    if (!socket_dir_.empty()) ::rmdir(socket_dir_.c_str());
    char pattern[] = "/tmp/tensord-handoff-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    socket_dir_ = pattern;
    socket_path_ = socket_dir_ + "/handoff.sock";
    ServerProcessOptions options;
    options.flags = {"--handoff-socket=" + socket_path_};
    for (std::string& flag : flags) options.flags.push_back(std::move(flag));
    absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    local_ = Connect(TransferPath::kLocal);
    remote_ = Connect(TransferPath::kRemote);
    ASSERT_NE(local_, nullptr);
    ASSERT_NE(remote_, nullptr);
  }

  void TearDown() override {
    local_.reset();
    remote_.reset();
    server_.reset();
    if (!socket_dir_.empty()) ::rmdir(socket_dir_.c_str());
  }

  std::unique_ptr<Client> Connect(TransferPath path) {
    ClientOptions options;
    options.path = path;
    return ConnectClient(server_->address(), options);
  }

  uint64_t OpenLeases(const std::string& name, uint64_t version = 0) {
    absl::StatusOr<TensorInfo> info = remote_->Stat(name, version);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->open_leases : ~uint64_t{0};
  }

  // Polls until `name` has `expected` open leases or `timeout` passes.
  bool WaitForLeases(const std::string& name, uint64_t expected, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (OpenLeases(name) == expected) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return OpenLeases(name) == expected;
  }

  std::unique_ptr<ServerProcess> server_;
  std::string socket_dir_;
  std::string socket_path_;
  std::unique_ptr<Client> local_;
  std::unique_ptr<Client> remote_;
};

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_INTEGRATION_HANDOFF_SERVER_TEST_H_
