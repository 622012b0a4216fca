#include "service/cluster/etcd_status.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace tensord {
namespace {

TEST(EtcdStatusTest, ADeadlineThatPassedInsideEtcdIsATimeout) {
  // What etcd 3.4 answers a LeaseGrant whose grpc-timeout ran out in raft.
  const absl::Status status =
      EtcdCallStatus(grpc::Status(grpc::StatusCode::UNKNOWN, "context deadline exceeded"),
                     "lease grant", "http://127.0.0.1:2379");
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "lease grant")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "http://127.0.0.1:2379")) << status;
  EXPECT_TRUE(IsEtcdEndpointFailure(status));
}

// The same TSan run: a connection etcd accepted but did not answer in time
// ("connection attempt timed out before receiving SETTINGS frame") is a
// slow etcd, as a deadline is, not one that refuses connections.
TEST(EtcdStatusTest, AConnectionThatTimedOutIsATimeoutAndARefusedOneIsNot) {
  const absl::Status slow = EtcdCallStatus(
      grpc::Status(grpc::StatusCode::UNAVAILABLE,
                   "failed to connect to all addresses; last error: UNKNOWN: "
                   "ipv4:127.0.0.1:33941: connection attempt timed out before receiving "
                   "SETTINGS frame"),
      "lease grant", "e");
  EXPECT_EQ(slow.code(), absl::StatusCode::kDeadlineExceeded) << slow;
  const absl::Status refused = EtcdCallStatus(
      grpc::Status(grpc::StatusCode::UNAVAILABLE,
                   "failed to connect to all addresses; last error: UNKNOWN: "
                   "ipv4:127.0.0.1:1: Failed to connect to remote host: Connection refused"),
      "lease grant", "e");
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
}

TEST(EtcdStatusTest, EtcdsVerdictsKeepTheirCodeAndAreNotEndpointFailures) {
  const absl::Status refused = EtcdCallStatus(
      grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "etcdserver: requested lease not found"),
      "keepalive", "e");
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(IsEtcdEndpointFailure(refused));
  const absl::Status other =
      EtcdCallStatus(grpc::Status(grpc::StatusCode::UNKNOWN, "some other failure"), "put", "e");
  EXPECT_EQ(other.code(), absl::StatusCode::kUnknown);
  EXPECT_FALSE(IsEtcdEndpointFailure(other));
}

TEST(EtcdStatusTest, UnreachableAndTimedOutEndpointsAreEndpointFailures) {
  EXPECT_TRUE(IsEtcdEndpointFailure(EtcdCallStatus(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"), "put", "e")));
  EXPECT_TRUE(IsEtcdEndpointFailure(EtcdCallStatus(
      grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"), "put", "e")));
}

TEST(EtcdStatusTest, AFullQuotaNamesTheFlagAndTheWayOut) {
  const absl::Status status =
      EtcdCallStatus(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                  "etcdserver: mvcc: database space exceeded"),
                     "txn", "e");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(status.message(), "--quota-backend-bytes")) << status;
}

}  // namespace
}  // namespace tensord
