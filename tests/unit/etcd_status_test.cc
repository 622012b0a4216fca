#include "service/cluster/etcd_status.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace tensord {
namespace {

TEST(EtcdStatusTest, ADeadlineThatPassedInsideEtcdIsATimeout) {
  // What etcd 3.4 answers a LeaseGrant whose grpc-timeout ran out in raft.
  const absl::Status status = EtcdCallStatus(
      grpc::Status(grpc::StatusCode::UNKNOWN, "context deadline exceeded"), "lease grant",
      "http://127.0.0.1:2379");
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "lease grant")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "http://127.0.0.1:2379")) << status;
  EXPECT_TRUE(IsEtcdEndpointFailure(status));
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
  EXPECT_TRUE(IsEtcdEndpointFailure(
      EtcdCallStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused"), "put", "e")));
  EXPECT_TRUE(IsEtcdEndpointFailure(EtcdCallStatus(
      grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "Deadline Exceeded"), "put", "e")));
}

TEST(EtcdStatusTest, AFullQuotaNamesTheFlagAndTheWayOut) {
  const absl::Status status = EtcdCallStatus(
      grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "etcdserver: mvcc: database space exceeded"),
      "txn", "e");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(status.message(), "--quota-backend-bytes")) << status;
}

}  // namespace
}  // namespace tensord
