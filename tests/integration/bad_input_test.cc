// Bad input through tensord::Client: each call answers with the right code
// and a message naming the bad value, and the server keeps serving (checked
// after every test by the fixture). Malformed wire messages the client
// cannot produce are in raw_protocol_test.cc.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/client_test_support.h"

namespace tensord::testing {
namespace {

using absl::StatusCode;

class BadInputTest : public ClientServerTest<BadInputTest> {};

struct BadName {
  std::string name;
  std::string mentioned;  // what the message must contain
};

std::vector<BadName> BadNames() {
  const std::string long_name(300, 'x');
  return {{"", "empty"},    {"../x", "../x"}, {"a b", "a b"},       {"/abs", "/abs"},
          {"a//b", "a//b"}, {"x/..", "x/.."}, {"tab\tname", "tab"}, {long_name, long_name}};
}

TEST_P(BadInputTest, InvalidNamesInEveryCall) {
  HostTensor tensor = CompactTensor(kU8, {3}, {1, 2, 3});
  for (const BadName& bad : BadNames()) {
    SCOPED_TRACE(absl::StrCat("name '", bad.name, "'"));
    EXPECT_TRUE(StatusIs(client().Put(bad.name, tensor.dl()).status(), StatusCode::kInvalidArgument,
                         bad.mentioned));
    EXPECT_TRUE(
        StatusIs(client().Fetch(bad.name).status(), StatusCode::kInvalidArgument, bad.mentioned));
    EXPECT_TRUE(
        StatusIs(client().Stat(bad.name).status(), StatusCode::kInvalidArgument, bad.mentioned));
    EXPECT_TRUE(
        StatusIs(client().Delete(bad.name).status(), StatusCode::kInvalidArgument, bad.mentioned));
    std::string out;
    EXPECT_TRUE(StatusIs(client().FetchBytes(bad.name, 0, 0, out).status(),
                         StatusCode::kInvalidArgument, bad.mentioned));
    HostTensor destination = CompactTensor(kU8, {3}, {0, 0, 0});
    EXPECT_TRUE(StatusIs(client().FetchInto(bad.name, destination.dl()).status(),
                         StatusCode::kInvalidArgument, bad.mentioned));
  }
}

TEST_P(BadInputTest, InvalidListPrefix) {
  EXPECT_TRUE(StatusIs(client().List("a b").status(), StatusCode::kInvalidArgument, "a b"));
  EXPECT_TRUE(StatusIs(client().ListAll("a b").status(), StatusCode::kInvalidArgument, "a b"));
}

TEST_P(BadInputTest, InvalidDtypes) {
  const std::string name = TestTensorName("t");
  HostTensor tensor = CompactTensor(DLDataType{99, 8, 1}, {4}, {1, 2, 3, 4});
  EXPECT_TRUE(
      StatusIs(client().Put(name, tensor.dl()).status(), StatusCode::kInvalidArgument, "99"));
  tensor.dtype = DLDataType{dlpack::kFloat, 7, 1};
  EXPECT_TRUE(
      StatusIs(client().Put(name, tensor.dl()).status(), StatusCode::kInvalidArgument, "7"));
  tensor.dtype = DLDataType{dlpack::kUInt, 8, 0};
  EXPECT_TRUE(
      StatusIs(client().Put(name, tensor.dl()).status(), StatusCode::kInvalidArgument, "0"));
  EXPECT_TRUE(StatusIs(client().Stat(name).status(), StatusCode::kNotFound));
}

TEST_P(BadInputTest, InvalidShapes) {
  const std::string name = TestTensorName("t");
  HostTensor tensor = CompactTensor(kU8, {3, -2}, std::vector<uint8_t>(16));
  EXPECT_TRUE(
      StatusIs(client().Put(name, tensor.dl()).status(), StatusCode::kInvalidArgument, "-2"));

  tensor = CompactTensor(kU8, std::vector<int64_t>(33, 1), std::vector<uint8_t>(1));
  EXPECT_TRUE(
      StatusIs(client().Put(name, tensor.dl()).status(), StatusCode::kInvalidArgument, "33"));

  DLTensor no_shape = CompactTensor(kU8, {4}, std::vector<uint8_t>(4)).dl();
  no_shape.shape = nullptr;
  EXPECT_EQ(client().Put(name, no_shape).status().code(), StatusCode::kInvalidArgument);

  DLTensor negative_ndim = CompactTensor(kU8, {4}, std::vector<uint8_t>(4)).dl();
  negative_ndim.ndim = -1;
  EXPECT_TRUE(
      StatusIs(client().Put(name, negative_ndim).status(), StatusCode::kInvalidArgument, "-1"));
  EXPECT_TRUE(StatusIs(client().Stat(name).status(), StatusCode::kNotFound));
}

TEST_P(BadInputTest, SubByteTensorWithStrides) {
  const std::string name = TestTensorName("t");
  HostTensor tensor =
      CompactTensor(DLDataType{dlpack::kInt, 4, 1}, {2, 4}, std::vector<uint8_t>(4));
  tensor.strides = {1, 2};
  EXPECT_TRUE(
      StatusIs(client().Put(name, tensor.dl()).status(), StatusCode::kInvalidArgument, "int4"));
  EXPECT_TRUE(StatusIs(client().Stat(name).status(), StatusCode::kNotFound));
}

TEST_P(BadInputTest, MissingTensor) {
  const std::string name = TestTensorName("missing");
  EXPECT_TRUE(StatusIs(client().Fetch(name).status(), StatusCode::kNotFound, name));
  EXPECT_TRUE(StatusIs(client().Stat(name).status(), StatusCode::kNotFound, name));
  EXPECT_TRUE(StatusIs(client().Delete(name).status(), StatusCode::kNotFound, name));
  std::string out;
  EXPECT_TRUE(StatusIs(client().FetchBytes(name, 0, 0, out).status(), StatusCode::kNotFound, name));
  HostTensor destination = CompactTensor(kU8, {3}, {0, 0, 0});
  EXPECT_TRUE(
      StatusIs(client().FetchInto(name, destination.dl()).status(), StatusCode::kNotFound, name));
}

TEST_P(BadInputTest, UnreachableServerIsUnavailable) {
  ClientOptions options = RemoteClientOptions();
  options.timeout = absl::Seconds(5);
  // A Unix socket path nobody listens on fails fast and cleanly.
  std::unique_ptr<Client> nowhere =
      ConnectClient(absl::StrCat("unix:", server().temp_dir(), "/nobody.sock"), options);
  ASSERT_NE(nowhere, nullptr);
  absl::Status status = nowhere->Stat("x").status();
  EXPECT_TRUE(status.code() == StatusCode::kUnavailable ||
              status.code() == StatusCode::kDeadlineExceeded)
      << status;
}

INSTANTIATE_TEST_SUITE_P(Transports, BadInputTest, kBothTransports, TransportParamName);

}  // namespace
}  // namespace tensord::testing
