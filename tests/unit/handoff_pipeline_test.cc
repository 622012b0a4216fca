// HandoffConnection::CallPipelined against a scripted server on a real
// seqpacket socket: requests go two in flight, answers come back in order,
// and after a failed request no new one is sent while the one already in
// flight is still answered (so the socket stays in step for the next call).
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/src/batch_request_wire.h"
#include "client/src/handoff_connection.h"
#include "gtest/gtest.h"
#include "service/common/unix_socket.h"
#include "tensord/v1/handoff.pb.h"

namespace tensord {
namespace {

// Answers every put_many with one result per item; the request whose first
// item is named "fail" is refused as a whole (INVALID_ARGUMENT), and at
// one named "drop" it closes the connection unanswered. Records how many
// requests it had received when it answered each: from the second answer
// on it waits (up to 5 s) for the next request while fewer than
// `expected_requests` came, since a pipelining client sends it before it
// reads that answer.
class ScriptedServer {
 public:
  explicit ScriptedServer(int expected_requests) : expected_requests_(expected_requests) {
    char dir[] = "/tmp/handoff-pipeline-XXXXXX";
    dir_ = ::mkdtemp(dir);
    path_ = dir_ + "/handoff.sock";
    absl::StatusOr<ScopedFd> listener = ListenSeqpacket(path_, 0600);
    EXPECT_TRUE(listener.ok()) << listener.status();
    listener_ = *std::move(listener);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    thread_.join();
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }
  // Requests received by the time each answer was sent.
  std::vector<int> received_when_answered;

 private:
  void Serve() {
    // The listener is non-blocking: wait for the client first. On failure
    // the listener closes, which ends the client's connection (no hang).
    pollfd ready{listener_.get(), POLLIN, 0};
    ScopedFd connection;
    if (::poll(&ready, 1, 10'000) == 1) {
      connection.Reset(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    }
    listener_.Reset();
    ASSERT_TRUE(connection.valid()) << "no client within 10 s";
    int received = 0;
    while (true) {
      absl::StatusOr<ReceivedPacket> packet =
          ReceivePacket(connection.get(), kMaxBatchPacketBytes, 1);
      if (!packet.ok()) return;  // the client closed
      ++received;
      v1::HandoffRequest request;
      ASSERT_TRUE(request.ParseFromString(packet->bytes));
      const std::string first_item =
          request.put_many().items_size() > 0 ? request.put_many().items(0).name() : "";
      if (first_item == "drop") return;  // closes the connection unanswered
      if (received > 1 && received < expected_requests_) {
        pollfd next{connection.get(), POLLIN, 0};
        ::poll(&next, 1, 5'000);
      }
      v1::HandoffResponse response;
      response.set_request_id(request.request_id());
      if (first_item == "fail") {
        response.set_code(static_cast<int32_t>(absl::StatusCode::kInvalidArgument));
        response.set_message("scripted refusal");
      } else {
        for (int i = 0; i < request.put_many().items_size(); ++i) {
          response.mutable_put_many()->add_results()->set_version(request.request_id());
        }
      }
      const bool queued_next =
          ::recv(connection.get(), nullptr, 0, MSG_PEEK | MSG_DONTWAIT | MSG_TRUNC) >= 0;
      received_when_answered.push_back(received + (queued_next ? 1 : 0));
      ASSERT_TRUE(SendPacket(connection.get(), response.SerializeAsString()).ok());
    }
  }

  const int expected_requests_;
  std::string dir_;
  std::string path_;
  ScopedFd listener_;
  std::thread thread_;
};

// `names[i]` is the first item of request i. `outcomes[i]` is its answer's
// version or error, prefixed "delivered: " when the request went out.
void RunPipeline(ScriptedServer& server, const std::vector<std::string>& names,
                 std::vector<std::string>& outcomes, size_t& filled) {
  absl::StatusOr<std::shared_ptr<HandoffConnection>> connection =
      HandoffConnection::Connect(server.path(), nullptr);
  ASSERT_TRUE(connection.ok()) << connection.status();
  outcomes.assign(names.size(), "not sent");
  filled = 0;
  (*connection)
      ->CallPipelined(
          names.size(), /*fd=*/-1,
          [&](size_t index, v1::HandoffRequest& request, std::string& appended_fields) {
            ++filled;
            if (index % 2 == 0) {
              request.mutable_put_many()->add_items()->set_name(names[index]);
              return absl::OkStatus();
            }
            // Odd requests framed by hand, as a local batch put frames them.
            const dlpack::TensorLayout layout;
            PutManyItemWire item;
            item.name = names[index];
            item.layout = &layout;
            AppendPutManyField({&item, 1}, /*atomic=*/false, appended_fields);
            return absl::OkStatus();
          },
          [&](size_t index, bool delivered, absl::StatusOr<HandoffConnection::Response> answer) {
            outcomes[index] = absl::StrCat(
                delivered ? "delivered: " : "",
                answer.ok()
                    ? absl::StrCat("version ", answer->message->put_many().results(0).version())
                    : std::string(answer.status().message()));
            return answer.ok();
          });
}

TEST(HandoffPipelineTest, RequestsGoTwoInFlightAndAnswersComeInOrder) {
  ScriptedServer server(/*expected_requests=*/4);
  std::vector<std::string> outcomes;
  size_t filled = 0;
  RunPipeline(server, {"a", "b", "c", "d"}, outcomes, filled);
  EXPECT_EQ(filled, 4u);
  // Request ids count from 1, so each answer names its own request.
  EXPECT_EQ(outcomes, (std::vector<std::string>{"delivered: version 1", "delivered: version 2",
                                                "delivered: version 3", "delivered: version 4"}));
  // The first is answered alone (credentials not yet taken); from the
  // second on, the next request was queued while one was being served.
  ASSERT_EQ(server.received_when_answered.size(), 4u);
  EXPECT_EQ(server.received_when_answered[0], 1);
  EXPECT_EQ(server.received_when_answered[1], 3);
  EXPECT_EQ(server.received_when_answered[2], 4);
  EXPECT_EQ(server.received_when_answered[3], 4);
}

TEST(HandoffPipelineTest, AfterAFailedRequestNoneIsSentButTheOneInFlightIsAnswered) {
  ScriptedServer server(/*expected_requests=*/3);
  std::vector<std::string> outcomes;
  size_t filled = 0;
  RunPipeline(server, {"a", "fail", "c", "d", "e"}, outcomes, filled);
  // Request 2 was already in flight when request 1's refusal came: it is
  // answered (and published, on a real server); 3 and 4 are never sent.
  EXPECT_EQ(filled, 3u);
  EXPECT_EQ(outcomes,
            (std::vector<std::string>{"delivered: version 1", "delivered: scripted refusal",
                                      "delivered: version 3", "not sent", "not sent"}));
  EXPECT_EQ(server.received_when_answered.size(), 3u);
}

// A request the server took and never answered (the connection closed) is
// reported delivered with the socket's error: its outcome is unknown, which
// BatchPut reports per item instead of failing the call (a retry over gRPC
// could publish it twice). Nothing after it is sent.
TEST(HandoffPipelineTest, ARequestLeftUnansweredIsReportedDelivered) {
  ScriptedServer server(/*expected_requests=*/3);
  std::vector<std::string> outcomes;
  size_t filled = 0;
  RunPipeline(server, {"a", "drop", "c", "d"}, outcomes, filled);
  EXPECT_EQ(outcomes[0], "delivered: version 1");
  EXPECT_TRUE(absl::StartsWith(outcomes[1], "delivered: handoff socket")) << outcomes[1];
  EXPECT_LE(filled, 3u);
  EXPECT_EQ(outcomes[3], "not sent");
}

}  // namespace
}  // namespace tensord
