// Per-call options against a real server: a call's own deadline replaces
// the client's, a CallCancellation ends a call in flight at once (and one
// cancelled before it starts moves no byte), on both transports, and bad
// options are refused naming the value.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

class CallOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<ServerProcess>> started =
        ServerProcess::Start(ServerProcessOptions{});
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    client_ = ConnectClient(server_->address(), RemoteClientOptions());  // no deadline
    ASSERT_NE(client_, nullptr);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Resume();
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Client> client_;
};

// The server stops answering (SIGSTOP): the client has no deadline, the
// call's own ends it.
TEST_F(CallOptionsTest, ACallsTimeoutReplacesTheClientsForThatCall) {
  HostTensor tensor = CompactTensor(kU8, {256}, PatternBytes(256, 1));
  ASSERT_TRUE(client_->Put("call/timeout", tensor.dl()).ok());
  server_->Pause();
  const absl::Time start = absl::Now();
  const absl::StatusOr<TensorInfo> stat =
      client_->Stat("call/timeout", 0, {.timeout = absl::Milliseconds(300)});
  const absl::StatusOr<Tensor> fetch =
      client_->Fetch("call/timeout", {}, {.timeout = absl::Milliseconds(300)});
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(stat.status().code(), absl::StatusCode::kDeadlineExceeded) << stat.status();
  EXPECT_EQ(fetch.status().code(), absl::StatusCode::kDeadlineExceeded) << fetch.status();
  server_->Resume();
  EXPECT_TRUE(client_->Stat("call/timeout").ok()) << "the next call has the client's (none)";
}

// A call blocked on a server that does not answer ends with CANCELLED as
// soon as another thread cancels it; a gRPC-only call and a fetch alike.
TEST_F(CallOptionsTest, CancelEndsACallInFlightAtOnce) {
  HostTensor tensor = CompactTensor(kU8, {1 << 20}, PatternBytes(1 << 20, 2));
  ASSERT_TRUE(client_->Put("call/cancel", tensor.dl()).ok());
  server_->Pause();
  CallCancellation cancellation;
  absl::StatusOr<TensorInfo> stat = absl::UnknownError("not run");
  absl::StatusOr<Tensor> fetch = absl::UnknownError("not run");
  std::atomic<int> finished{0};
  std::thread stat_thread([&] {
    stat = client_->Stat("call/cancel", 0, {.cancellation = &cancellation});
    ++finished;
  });
  std::thread fetch_thread([&] {
    fetch = client_->Fetch("call/cancel", {.streams = 1}, {.cancellation = &cancellation});
    ++finished;
  });
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(finished.load(), 0) << "the paused server answered";
  const absl::Time cancelled_at = absl::Now();
  cancellation.Cancel();
  stat_thread.join();
  fetch_thread.join();
  EXPECT_LT(absl::Now() - cancelled_at, absl::Seconds(5));
  EXPECT_EQ(stat.status().code(), absl::StatusCode::kCancelled) << stat.status();
  EXPECT_EQ(fetch.status().code(), absl::StatusCode::kCancelled) << fetch.status();
  EXPECT_TRUE(cancellation.cancelled());
  server_->Resume();
  EXPECT_TRUE(client_->Fetch("call/cancel").ok()) << "the client itself goes on";
}

// Cancelled before it starts: CANCELLED, and the server never saw the put.
TEST_F(CallOptionsTest, ACallCancelledBeforeItStartsMovesNothing) {
  CallCancellation cancellation;
  cancellation.Cancel();
  HostTensor tensor = CompactTensor(kU8, {4096}, PatternBytes(4096, 3));
  const absl::StatusOr<TensorInfo> put =
      client_->Put("call/never", tensor.dl(), {}, {.cancellation = &cancellation});
  EXPECT_EQ(put.status().code(), absl::StatusCode::kCancelled) << put.status();
  EXPECT_EQ(client_->Stat("call/never").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->List("call/", 0, "", {.cancellation = &cancellation}).status().code(),
            absl::StatusCode::kCancelled);
}

// Over the local handoff a cancelled call is refused before it starts.
TEST(CallOptionsLocalTest, ALocalCallCancelledBeforeItStartsIsRefused) {
  TempDir dir;
  ServerProcessOptions options;
  options.flags = {"--handoff-socket=" + dir.File("handoff.sock")};
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions client_options;
  client_options.server = (*server)->address();
  client_options.path = TransferPath::kLocal;
  std::unique_ptr<Client> client = ConnectClient((*server)->address(), client_options);
  ASSERT_NE(client, nullptr);
  HostTensor tensor = CompactTensor(kU8, {4096}, PatternBytes(4096, 4));
  ASSERT_TRUE(client->Put("call/local", tensor.dl()).ok());
  CallCancellation cancellation;
  cancellation.Cancel();
  const absl::StatusOr<Tensor> fetch =
      client->Fetch("call/local", {}, {.cancellation = &cancellation});
  EXPECT_EQ(fetch.status().code(), absl::StatusCode::kCancelled) << fetch.status();
  EXPECT_TRUE(absl::StrContains(fetch.status().message(), "fetch of 'call/local'"));
  const absl::StatusOr<TensorInfo> put =
      client->Put("call/local", tensor.dl(), {}, {.cancellation = &cancellation});
  EXPECT_EQ(put.status().code(), absl::StatusCode::kCancelled) << put.status();
  EXPECT_EQ(client->Stat("call/local")->version, 1u) << "the cancelled put published nothing";
}

TEST_F(CallOptionsTest, ATimeoutThatIsNotPositiveIsRefusedNamingIt) {
  const absl::StatusOr<TensorInfo> zero = client_->Stat("x", 0, {.timeout = absl::ZeroDuration()});
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(zero.status().message(), "CallOptions::timeout 0 must be positive"))
      << zero.status();
}

}  // namespace
}  // namespace tensord::testing
