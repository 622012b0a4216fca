// Stat, List, Delete and versions through tensord::Client, and the server's
// capacity limits (--max-host-bytes, --max-tensor-bytes, --max-tensors).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/common/crc32c.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/raw_stub.h"

namespace tensord::testing {
namespace {

using absl::StatusCode;

std::vector<std::string> NamesOf(const std::vector<TensorInfo>& tensors) {
  std::vector<std::string> names;
  for (const TensorInfo& info : tensors) names.push_back(info.name);
  return names;
}

class RegistryOpsTest : public ClientServerTest<RegistryOpsTest> {
 protected:
  absl::StatusOr<TensorInfo> PutBytes(const std::string& name, size_t size, uint64_t seed = 1) {
    HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(size)}, PatternBytes(size, seed));
    return client().Put(name, tensor.dl());
  }
};

TEST_P(RegistryOpsTest, StatDescribesTheStoredVersion) {
  const std::string name = TestTensorName("t");
  const absl::Time before = absl::Now();
  HostTensor tensor = CompactTensor(kF32, {2, 3, 4}, PatternBytes(96, 3));
  absl::StatusOr<TensorInfo> put = client().Put(name, tensor.dl());
  ASSERT_TRUE(put.ok()) << put.status();

  absl::StatusOr<TensorInfo> stat = client().Stat(name);
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->name, name);
  EXPECT_EQ(stat->version, put->version);
  EXPECT_EQ(stat->dtype.code, kF32.code);
  EXPECT_EQ(stat->dtype.bits, 32);
  EXPECT_EQ(stat->dtype.lanes, 1);
  EXPECT_EQ(stat->shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(stat->strides, (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(stat->byte_offset, 0u);
  EXPECT_EQ(stat->device.device_type, kDLCPU);
  EXPECT_EQ(stat->total_bytes, 96u);
  EXPECT_EQ(stat->crc32c, Crc32c(tensor.storage.data(), 96));
  EXPECT_GE(stat->created, before - absl::Seconds(5));
  EXPECT_LE(stat->created, absl::Now() + absl::Seconds(5));
  EXPECT_EQ(stat->open_leases, 0u);

  absl::StatusOr<TensorInfo> by_version = client().Stat(name, put->version);
  ASSERT_TRUE(by_version.ok()) << by_version.status();
  EXPECT_EQ(by_version->version, put->version);

  EXPECT_TRUE(StatusIs(client().Stat(TestTensorName("missing")).status(), StatusCode::kNotFound,
                       TestTensorName("missing")));
}

TEST_P(RegistryOpsTest, ListByPrefixInPages) {
  const std::string prefix = TestTensorName("dir/");
  const std::vector<std::string> names = {prefix + "a", prefix + "b", prefix + "c/x", prefix + "d",
                                          prefix + "e"};
  // Put out of order; List answers in name order.
  for (int i : {3, 0, 4, 1, 2}) ASSERT_TRUE(PutBytes(names[i], 10 + i).ok());
  // Names that share the start of the prefix but are not under it.
  ASSERT_TRUE(PutBytes(TestTensorName("dir"), 1).ok());
  ASSERT_TRUE(PutBytes(TestTensorName("dirx/a"), 1).ok());

  std::vector<std::string> seen;
  std::string token;
  std::vector<size_t> page_sizes;
  for (int page = 0; page < 10; ++page) {
    absl::StatusOr<ListResult> result = client().List(prefix, 2, token);
    ASSERT_TRUE(result.ok()) << result.status();
    page_sizes.push_back(result->tensors.size());
    for (const TensorInfo& info : result->tensors) {
      seen.push_back(info.name);
      EXPECT_EQ(info.total_bytes,
                10u + (std::find(names.begin(), names.end(), info.name) - names.begin()));
    }
    EXPECT_GT(result->total_bytes, 0u);
    token = result->next_page_token;
    if (token.empty()) break;
  }
  EXPECT_EQ(seen, names);
  EXPECT_EQ(page_sizes, (std::vector<size_t>{2, 2, 1}));

  absl::StatusOr<std::vector<TensorInfo>> all = client().ListAll(prefix);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(NamesOf(*all), names);

  absl::StatusOr<ListResult> none = client().List(TestTensorName("nothing-here/"));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->tensors.empty());
  EXPECT_TRUE(none->next_page_token.empty());
}

TEST_P(RegistryOpsTest, ListShowsOnlyTheLatestVersion) {
  const std::string prefix = TestTensorName("v/");
  ASSERT_TRUE(PutBytes(prefix + "a", 5).ok());
  absl::StatusOr<TensorInfo> latest = PutBytes(prefix + "a", 7);
  ASSERT_TRUE(latest.ok()) << latest.status();
  absl::StatusOr<ListResult> result = client().List(prefix);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->tensors.size(), 1u);
  EXPECT_EQ(result->tensors[0].version, latest->version);
  EXPECT_EQ(result->tensors[0].total_bytes, 7u);
}

TEST_P(RegistryOpsTest, ListRejectsBadArguments) {
  absl::Status status = client().List("", 5000).status();
  EXPECT_TRUE(StatusIs(status, StatusCode::kInvalidArgument, "5000"));
  status = client().List("", 2, "garbage!").status();
  EXPECT_TRUE(StatusIs(status, StatusCode::kInvalidArgument, "garbage!"));
}

TEST_P(RegistryOpsTest, DeleteRemovesTheName) {
  const std::string name = TestTensorName("t");
  absl::StatusOr<TensorInfo> put = PutBytes(name, 100);
  ASSERT_TRUE(put.ok()) << put.status();
  absl::StatusOr<uint64_t> removed = client().Delete(name);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, put->version);
  EXPECT_TRUE(StatusIs(client().Stat(name).status(), StatusCode::kNotFound, name));
  EXPECT_TRUE(StatusIs(client().Fetch(name).status(), StatusCode::kNotFound, name));
  EXPECT_TRUE(StatusIs(client().Delete(name).status(), StatusCode::kNotFound, name));
  absl::StatusOr<ListResult> listed = client().List(name);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->tensors.empty());

  // The name can be used again, with a newer version.
  absl::StatusOr<TensorInfo> again = PutBytes(name, 10);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_GT(again->version, put->version);
}

TEST_P(RegistryOpsTest, DeleteOnlyAtTheExpectedVersion) {
  const std::string name = TestTensorName("t");
  absl::StatusOr<TensorInfo> first = PutBytes(name, 10);
  absl::StatusOr<TensorInfo> second = PutBytes(name, 20);
  ASSERT_TRUE(first.ok() && second.ok());
  absl::Status stale = client().Delete(name, first->version).status();
  EXPECT_TRUE(StatusIs(stale, StatusCode::kFailedPrecondition, absl::StrCat(first->version)));
  EXPECT_TRUE(MessageMentions(stale, absl::StrCat(second->version)));
  ASSERT_TRUE(client().Stat(name).ok()) << "a failed delete keeps the tensor";
  absl::StatusOr<uint64_t> removed = client().Delete(name, second->version);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, second->version);
}

TEST_P(RegistryOpsTest, VersionsIncreaseAndSupersededOnesGo) {
  const std::string name = TestTensorName("t");
  std::vector<uint64_t> versions;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<TensorInfo> put = PutBytes(name, 10 + i, i);
    ASSERT_TRUE(put.ok()) << put.status();
    if (!versions.empty()) {
      EXPECT_GT(put->version, versions.back());
    }
    versions.push_back(put->version);
  }
  // Another name's put still takes a larger version (server-wide counter).
  absl::StatusOr<TensorInfo> other = PutBytes(TestTensorName("other"), 1);
  ASSERT_TRUE(other.ok());
  EXPECT_GT(other->version, versions.back());

  for (size_t i = 0; i + 1 < versions.size(); ++i) {
    FetchOptions options;
    options.version = versions[i];
    EXPECT_TRUE(StatusIs(client().Fetch(name, options).status(), StatusCode::kNotFound,
                         absl::StrCat(versions[i])));
  }
  absl::StatusOr<TensorInfo> latest = client().Stat(name);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->version, versions.back());
  EXPECT_EQ(latest->total_bytes, 14u);
}

INSTANTIATE_TEST_SUITE_P(Transports, RegistryOpsTest, kBothTransports, TransportParamName);

// ---- --max-host-bytes ----

class HostCapacityTest : public ClientServerTest<HostCapacityTest> {
 public:
  static std::vector<std::string> ServerFlags() { return {"--max-host-bytes=1MiB"}; }

 protected:
  void SetUp() override {
    ClientServerTest::SetUp();
    if (HasFatalFailure()) return;
    // Each test starts with the whole budget free.
    absl::StatusOr<std::vector<TensorInfo>> all = client().ListAll("");
    ASSERT_TRUE(all.ok()) << all.status();
    for (const TensorInfo& info : *all) ASSERT_TRUE(client().Delete(info.name).ok());
  }

  absl::StatusOr<TensorInfo> PutBytes(const std::string& name, size_t size) {
    HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(size)}, PatternBytes(size, size));
    return client().Put(name, tensor.dl());
  }
};

TEST_P(HostCapacityTest, PutBeyondTheLimitIsResourceExhausted) {
  const std::string name = TestTensorName("big");
  absl::Status status = PutBytes(name, 2 << 20).status();
  EXPECT_TRUE(StatusIs(status, StatusCode::kResourceExhausted, absl::StrCat(2 << 20)));
  EXPECT_TRUE(MessageMentions(status, absl::StrCat(1 << 20)));
  EXPECT_TRUE(StatusIs(client().Stat(name).status(), StatusCode::kNotFound));
  // The server keeps serving.
  EXPECT_TRUE(PutBytes(TestTensorName("small"), 4096).ok());
}

TEST_P(HostCapacityTest, DeletingFreesTheBudget) {
  ASSERT_TRUE(PutBytes(TestTensorName("a"), 600 << 10).ok());
  absl::Status status = PutBytes(TestTensorName("b"), 600 << 10).status();
  EXPECT_TRUE(StatusIs(status, StatusCode::kResourceExhausted, absl::StrCat(600 << 10)));
  ASSERT_TRUE(client().Delete(TestTensorName("a")).ok());
  EXPECT_TRUE(PutBytes(TestTensorName("b"), 600 << 10).ok()) << "a delete returns its bytes";
}

TEST_P(HostCapacityTest, FailedPutsReturnTheirReservation) {
  // Interrupted and invalid puts of 800 KiB, each holding a reservation while
  // it lasted; afterwards the whole budget must be available again.
  std::unique_ptr<RawStub> stub = NewRawStub(server().address());
  const std::string chunk = AsString(PatternBytes(100 << 10, 1));
  for (int i = 0; i < 3; ++i) {
    const std::string name = TestTensorName(absl::StrCat("partial", i));
    EXPECT_FALSE(RawPut(*stub,
                        {HeaderMessage(name, RawDataType(1, 8), {800 << 10}, 800 << 10),
                         ChunkMessage(0, chunk)},
                        nullptr, /*writes_done=*/i % 2 == 0)
                     .ok());
  }
  // The server frees a cancelled put's bytes once it notices the cancel.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::Status status;
  do {
    status = PutBytes(TestTensorName("whole"), 1 << 20).status();
    if (status.ok()) break;
    absl::SleepFor(absl::Milliseconds(50));
  } while (absl::Now() < deadline);
  EXPECT_TRUE(status.ok()) << status;
  // Room for the fixture's check that the server still serves.
  EXPECT_TRUE(client().Delete(TestTensorName("whole")).ok());
}

INSTANTIATE_TEST_SUITE_P(Transports, HostCapacityTest, kBothTransports, TransportParamName);

// ---- --max-tensors and --max-tensor-bytes ----

class LimitsTest : public ClientServerTest<LimitsTest> {
 public:
  // ExpectServing() after each test needs one name of its own.
  static std::vector<std::string> ServerFlags() {
    return {"--max-tensors=4", "--max-tensor-bytes=64KiB"};
  }

 protected:
  void SetUp() override {
    ClientServerTest::SetUp();
    if (HasFatalFailure()) return;
    absl::StatusOr<std::vector<TensorInfo>> all = client().ListAll("");
    ASSERT_TRUE(all.ok()) << all.status();
    for (const TensorInfo& info : *all) ASSERT_TRUE(client().Delete(info.name).ok());
  }

  absl::StatusOr<TensorInfo> PutBytes(const std::string& name, size_t size) {
    HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(size)}, PatternBytes(size, 1));
    return client().Put(name, tensor.dl());
  }
};

TEST_P(LimitsTest, MaxTensorsCountsNamesNotVersions) {
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(PutBytes(TestTensorName(absl::StrCat(i)), 8).ok());
  absl::Status status = PutBytes(TestTensorName("4"), 8).status();
  EXPECT_TRUE(StatusIs(status, StatusCode::kResourceExhausted, "4"));
  EXPECT_TRUE(MessageMentions(status, TestTensorName("4")));
  EXPECT_TRUE(StatusIs(client().Stat(TestTensorName("4")).status(), StatusCode::kNotFound));
  // A new version of an existing name is fine.
  EXPECT_TRUE(PutBytes(TestTensorName("0"), 16).ok());
  ASSERT_TRUE(client().Delete(TestTensorName("1")).ok());
  EXPECT_TRUE(PutBytes(TestTensorName("4"), 8).ok());
  ASSERT_TRUE(client().Delete(TestTensorName("4")).ok());  // room for ExpectServing
}

TEST_P(LimitsTest, MaxTensorBytes) {
  absl::Status status = PutBytes(TestTensorName("big"), (64 << 10) + 1).status();
  EXPECT_TRUE(StatusIs(status, StatusCode::kResourceExhausted, absl::StrCat((64 << 10) + 1)));
  EXPECT_TRUE(PutBytes(TestTensorName("fits"), 64 << 10).ok());
}

INSTANTIATE_TEST_SUITE_P(Transports, LimitsTest, kBothTransports, TransportParamName);

}  // namespace
}  // namespace tensord::testing
