// Helpers shared by the integration tests that need no client library:
// host tensors to put, byte patterns, status assertions, and a fixture that
// shares one tensord process per transport across a test suite.
#ifndef TENSORD_TESTS_INTEGRATION_TEST_SUPPORT_H_
#define TENSORD_TESTS_INTEGRATION_TEST_SUPPORT_H_

#include <grpcpp/grpcpp.h>
#include <sys/wait.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tensord/dlpack.h"
#include "tests/integration/server_process.h"

namespace tensord::testing {

inline constexpr DLDataType kF32{dlpack::kFloat, 32, 1};
inline constexpr DLDataType kU8{dlpack::kUInt, 8, 1};
inline constexpr DLDataType kI32{dlpack::kInt, 32, 1};
inline constexpr DLDataType kU32{dlpack::kUInt, 32, 1};
inline constexpr DLDataType kU64{dlpack::kUInt, 64, 1};

// A host tensor to put: owns its storage, shape and strides. dl() points
// into them, so it is valid while this object lives and is not resized.
struct HostTensor {
  DLDataType dtype = kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // empty: DLTensor.strides = NULL (compact)
  std::vector<uint8_t> storage;
  size_t data_offset = 0;    // DLTensor.data = storage.data() + data_offset
  uint64_t byte_offset = 0;  // DLTensor.byte_offset

  DLTensor dl() const;
};

// A compact tensor holding `bytes`.
HostTensor CompactTensor(DLDataType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);

// The next number of a SplitMix64 sequence: cheap, deterministic randomness
// for soak workers (one `state` per thread).
uint64_t NextRandom(uint64_t& state);

// `size` deterministic pseudo-random bytes; different seeds give different bytes.
std::vector<uint8_t> PatternBytes(size_t size, uint64_t seed);

// Bytes of a compact tensor of `dtype` and `shape` (rounded up when packed).
size_t CompactBytes(DLDataType dtype, const std::vector<int64_t>& shape);

// Byte-for-byte equality that names the first differing offset instead of
// printing megabytes.
::testing::AssertionResult BytesEqual(const void* actual, size_t actual_size, const void* expected,
                                      size_t expected_size);
inline ::testing::AssertionResult BytesEqual(const void* actual, size_t actual_size,
                                             const std::vector<uint8_t>& expected) {
  return BytesEqual(actual, actual_size, expected.data(), expected.size());
}

// OK when `status` has `code` and its message contains `substring`.
::testing::AssertionResult StatusIs(const absl::Status& status, absl::StatusCode code,
                                    std::string_view substring = "");
::testing::AssertionResult GrpcStatusIs(const grpc::Status& status, grpc::StatusCode code,
                                        std::string_view substring = "");

// "tcp" / "unix" test name suffixes.
std::string TransportParamName(const ::testing::TestParamInfo<Transport>& info);

// A name unique to the running test: "<suite>/<test>/<stem>", using only
// characters tensor names allow.
std::string TestTensorName(std::string_view stem);

inline const auto kBothTransports = ::testing::Values(Transport::kTcp, Transport::kUnix);

// Runs each test against one tensord per transport, started on the first
// test that needs it and stopped at the end of the suite. `Derived` may
// declare `static std::vector<std::string> ServerFlags()` to add flags.
template <typename Derived>
class SharedServerTest : public ::testing::TestWithParam<Transport> {
 public:
  static std::vector<std::string> ServerFlags() { return {}; }
  // Stops the suite's servers; each must exit 0 (a sanitizer report or a
  // crash at shutdown fails the suite).
  static void TearDownTestSuite() {
    for (auto& [transport, server] : Servers()) {
      if (server == nullptr) continue;
      absl::StatusOr<int> status = server->Stop(SIGTERM, absl::Seconds(20));
      EXPECT_TRUE(status.ok() && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
          << "tensord (" << TransportName(transport) << ") did not exit 0 on SIGTERM: "
          << (status.ok() ? absl::StrCat("wait status ", *status) : status.status().ToString())
          << "; its stderr:\n"
          << server->StderrTail();
    }
    Servers().clear();
  }

 protected:
  void SetUp() override {
    std::unique_ptr<ServerProcess>& slot = Servers()[GetParam()];
    if (slot != nullptr && !slot->Alive()) {
      ADD_FAILURE() << "tensord died during an earlier test; its stderr:\n" << slot->StderrTail();
      slot.reset();
    }
    if (slot == nullptr) {
      ServerProcessOptions options;
      options.transport = GetParam();
      options.flags = Derived::ServerFlags();
      absl::StatusOr<std::unique_ptr<ServerProcess>> started = ServerProcess::Start(options);
      ASSERT_TRUE(started.ok()) << started.status();
      slot = std::move(*started);
    }
    server_ = slot.get();
  }

  void TearDown() override {
    if (server_ != nullptr) {
      EXPECT_TRUE(server_->Alive()) << "tensord exited during the test; its stderr:\n"
                                    << server_->StderrTail();
    }
  }

  ServerProcess& server() { return *server_; }

 private:
  static std::map<Transport, std::unique_ptr<ServerProcess>>& Servers() {
    static auto* servers = new std::map<Transport, std::unique_ptr<ServerProcess>>();
    return *servers;
  }

  ServerProcess* server_ = nullptr;
};

// Open fds listed in `proc_fd_dir` (e.g. "/proc/self/fd"), and how many of
// them are memfds (tensor memory).
size_t CountOpenFds(const std::string& proc_fd_dir);
size_t CountMemfds(const std::string& proc_fd_dir);

// The /proc/self/maps line of the mapping that contains `address` (empty
// when none does).
std::string MapsLineOf(const void* address);

// Lines of the file at `path` (e.g. /proc/PID/maps) that contain `needle`;
// every line when it is empty.
size_t CountLines(const std::string& path, const std::string& needle = "");

// How many times `needle` (not empty) occurs in `text`, e.g. an event in a log.
size_t CountOccurrences(absl::string_view text, absl::string_view needle);

// The value of `key=` in the first log line that has `event`, or "".
std::string LogField(const std::string& log, absl::string_view event, absl::string_view key);

// GET http://`address``path` (address: 127.0.0.1:PORT) with HTTP/1.0; the
// body of a 200 answer, or an error. Every wait is bounded.
absl::StatusOr<std::string> HttpGet(const std::string& address, const std::string& path);

// Polls `condition` every 10 ms until it holds (true) or `timeout` passes.
bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout);

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_INTEGRATION_TEST_SUPPORT_H_
