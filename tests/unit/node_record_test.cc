#include "service/cluster/node_record.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tensord {
namespace {

ClusterMember SampleMember() {
  ClusterMember member;
  member.node_name = "gpu-node-7";
  member.advertise_address = "10.0.0.7:50051";
  member.handoff_available = true;
  member.host_bytes_used = 123456789;
  member.host_bytes_limit = uint64_t{8} << 30;
  member.server_version = "0.9.0";
  member.start_time_unix_ms = 1795627464470;
  member.instance_id = "boot/42/1795627464470";
  return member;
}

TEST(NodeRecordTest, RoundTripsEveryField) {
  const ClusterMember member = SampleMember();
  absl::StatusOr<ClusterMember> decoded = DecodeNodeRecord(EncodeNodeRecord(member));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, member);
}

TEST(NodeRecordTest, IgnoresFieldsOfANewerVersion) {
  std::string record = EncodeNodeRecord(SampleMember());
  record.insert(1, "\"zone\":\"eu-1\",");
  absl::StatusOr<ClusterMember> decoded = DecodeNodeRecord(record);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->node_name, "gpu-node-7");
}

TEST(NodeRecordTest, RefusesWhatIsNotARecordNamingTheProblem) {
  struct Case {
    std::string text;
    std::string expected_in_error;
  };
  const std::string good = EncodeNodeRecord(SampleMember());
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  for (const Case& bad : {
           Case{"", "not JSON"},
           Case{"{\"node_name\":", "not JSON"},
           Case{"[1,2]", "not a JSON object"},
           Case{"{}", "node_name"},
           Case{replaced("\"handoff_available\":true", "\"handoff_available\":1"),
                "handoff_available"},
           Case{replaced("\"host_bytes_used\":123456789", "\"host_bytes_used\":-5"),
                "host_bytes_used"},
           Case{replaced("\"node_name\":\"gpu-node-7\"", "\"node_name\":\"a/b\""), "'/'"},
           Case{replaced("\"advertise_address\":\"10.0.0.7:50051\"", "\"advertise_address\":\"\""),
                "advertise_address"},
           Case{std::string(70000, ' '), "too large"},
       }) {
    absl::StatusOr<ClusterMember> decoded = DecodeNodeRecord(bad.text);
    ASSERT_FALSE(decoded.ok()) << bad.text;
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(absl::StrContains(decoded.status().message(), bad.expected_in_error))
        << decoded.status() << " for " << bad.text.substr(0, 60);
  }
}

TEST(NodeRecordTest, NodeNamesAreHostNameLike) {
  for (const char* good : {"a", "node-1", "gpu_7.rack-2", "X"}) {
    EXPECT_TRUE(ValidateNodeName(good).ok()) << good;
  }
  for (const char* bad : {"", ".", "..", "a/b", "with space", "ünï"}) {
    absl::Status status = ValidateNodeName(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(ValidateNodeName(std::string(254, 'a')).ok());
  EXPECT_TRUE(ValidateNodeName(std::string(253, 'a')).ok());
}

}  // namespace
}  // namespace tensord
