// A server closes an idle gRPC connection abruptly (gRPC 1.51's
// max_connection_idle), so the clients of tensord's servers, the C++ client
// and the cluster's channels between nodes, close theirs first. gRPC closes
// an idle connection between one and two idle timeouts after the last call:
// a client's twice its timeout must stay under the server's once.
#include "gtest/gtest.h"
#include "service/cluster/peer_channels.h"
#include "service/transport/server_options.h"
#include "tensord/client.h"

namespace tensord {
namespace {

TEST(IdleTimeoutsTest, ClientsCloseIdleConnectionsBeforeTheServerDoes) {
  const absl::Duration server = ConnectionLimits().idle_timeout;
  EXPECT_LT(2 * ClientOptions().connection_idle_timeout, server);
  EXPECT_LT(2 * PeerIdleTimeout(server), server);
  EXPECT_EQ(PeerIdleTimeout(absl::Minutes(10)), absl::Minutes(4));
}

TEST(IdleTimeoutsTest, PeerIdleTimeoutKeepsGrpcsMinimumAndNeverForNever) {
  EXPECT_EQ(PeerIdleTimeout(absl::Seconds(2)), absl::Seconds(1));
  EXPECT_EQ(PeerIdleTimeout(absl::Milliseconds(100)), absl::Seconds(1));
  EXPECT_EQ(PeerIdleTimeout(absl::ZeroDuration()), absl::InfiniteDuration());
}

}  // namespace
}  // namespace tensord
