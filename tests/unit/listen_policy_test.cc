#include "service/security/listen_policy.h"

#include <gtest/gtest.h>

namespace tensord {
namespace {

TEST(ListenPolicyTest, LoopbackAndUnixAreLocalOnly) {
  for (const char* address :
       {"unix:/run/tensord.sock", "127.0.0.1:50051", "127.3.2.1:0", "localhost:1", "LOCALHOST:1",
        "[::1]:50051", "[::ffff:127.0.0.1]:7"}) {
    EXPECT_TRUE(IsLocalOnlyAddress(address)) << address;
    EXPECT_TRUE(CheckPlaintextListener(address, false, false).ok()) << address;
  }
}

TEST(ListenPolicyTest, WildcardsAndRemoteHostsNeedTlsOrTheFlag) {
  for (const char* address : {"0.0.0.0:50051", "[::]:50051", "10.0.0.7:1", "128.0.0.1:1",
                              "tensord.example.com:443", "[::1:50051", "nocolon"}) {
    EXPECT_FALSE(IsLocalOnlyAddress(address)) << address;
    absl::Status refused = CheckPlaintextListener(address, false, false);
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << address;
    EXPECT_NE(refused.message().find(address), std::string::npos) << refused;
    EXPECT_TRUE(CheckPlaintextListener(address, /*tls=*/true, false).ok());
    EXPECT_TRUE(CheckPlaintextListener(address, false, /*allow_insecure_remote=*/true).ok());
  }
}

}  // namespace
}  // namespace tensord
