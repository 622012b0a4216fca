// The fixture for tests that go through tensord::Client: a shared server per
// transport (see SharedServerTest) and a connected client per test.
#ifndef TENSORD_TESTS_INTEGRATION_CLIENT_TEST_SUPPORT_H_
#define TENSORD_TESTS_INTEGRATION_CLIENT_TEST_SUPPORT_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "tensord/client.h"
#include "tensord/tensor.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {

// A client of `address` with a generous per-call deadline (unless `options`
// sets one), so a hung server fails the test instead of hanging it.
// ADD_FAILURE and nullptr on error.
std::unique_ptr<Client> ConnectClient(const std::string& address, ClientOptions options = {});

// Options that pin the gRPC path, whatever TransferPath::kAuto would pick.
ClientOptions RemoteClientOptions(std::string bearer_token = "");

// A copy of the bytes from a fetched tensor's data pointer to the end of
// its stored bytes (for a compact tensor: exactly its elements).
std::vector<uint8_t> TensorBytes(const Tensor& tensor);

// The strides (in elements) of a DLTensor; empty when NULL.
std::vector<int64_t> StridesOf(const DLTensor& tensor);
std::vector<int64_t> ShapeOf(const DLTensor& tensor);

// Row-major strides for `shape`, as the server fills them in.
std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& shape);

// `put` (a put's answer) describes what `client` stores under its name
// now: the same version, layout (strides filled in), device, size, CRC,
// retention and creation time as a Stat answers.
void ExpectInfoOfStored(Client& client, const TensorInfo& put);

// A put and a fetch of a small tensor still work.
void ExpectServing(Client& client);

// True when the message contains `text`, ignoring spaces in both (so
// "[3, 4]" and "[3,4]" match).
::testing::AssertionResult MessageMentions(const absl::Status& status, std::string_view text);

template <typename Derived>
class ClientServerTest : public SharedServerTest<Derived> {
 protected:
  void SetUp() override {
    SharedServerTest<Derived>::SetUp();
    if (::testing::Test::HasFatalFailure()) return;
    // The shared servers run without --handoff-socket; pinning the path
    // keeps these suites on gRPC whatever kAuto comes to prefer.
    client_ = ConnectClient(this->server().address(), RemoteClientOptions());
    ASSERT_NE(client_, nullptr);
  }

  void TearDown() override {
    if (client_ != nullptr && this->server().Alive()) ExpectServing(*client_);
    client_.reset();
    SharedServerTest<Derived>::TearDown();
  }

  Client& client() { return *client_; }

  std::unique_ptr<Client> client_;
};

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_INTEGRATION_CLIENT_TEST_SUPPORT_H_
