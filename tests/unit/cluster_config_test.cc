#include "service/cluster/cluster_config.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "service/cluster/etcd_client.h"
#include "service/cluster/node_record.h"

namespace tensord {
namespace {

ClusterFlags MinimalFlags() {
  ClusterFlags flags;
  flags.etcd_endpoints = "http://127.0.0.1:2379";
  flags.node_name = "node-a";
  return flags;
}

::testing::AssertionResult RefusedNaming(const absl::StatusOr<ClusterConfig>& config,
                                         const std::string& flag, const std::string& value) {
  if (config.ok()) return ::testing::AssertionFailure() << "accepted";
  if (config.status().code() != absl::StatusCode::kInvalidArgument ||
      !absl::StrContains(config.status().message(), flag) ||
      !absl::StrContains(config.status().message(), value)) {
    return ::testing::AssertionFailure()
           << config.status() << " does not name " << flag << " " << value;
  }
  return ::testing::AssertionSuccess();
}

TEST(ClusterConfigTest, DefaultsAreUsable) {
  absl::StatusOr<ClusterConfig> config = ClusterConfigFromFlags(MinimalFlags());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->etcd.endpoints, std::vector<std::string>{"http://127.0.0.1:2379"});
  EXPECT_EQ(config->membership.prefix, "/tensord");
  EXPECT_EQ(config->membership.lease_ttl, absl::Seconds(5));
  // Renewals every TTL/3 must be able to time out and fail over in time.
  EXPECT_LE(config->etcd.call_timeout, absl::Seconds(5) / 3);
}

TEST(ClusterConfigTest, NodeNameDefaultsToTheHostName) {
  ClusterFlags flags = MinimalFlags();
  flags.node_name.clear();
  absl::StatusOr<ClusterConfig> config = ClusterConfigFromFlags(flags);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  if (!ValidateNodeName(host).ok()) GTEST_SKIP() << "this host's name '" << host << "' is unusual";
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->membership.node_name, host);
}

TEST(ClusterConfigTest, MalformedValuesAreRefusedNamingFlagAndValue) {
  ClusterFlags flags = MinimalFlags();
  flags.etcd_endpoints = "http://127.0.0.1:2379,ftp://etcd:2379";
  EXPECT_TRUE(RefusedNaming(ClusterConfigFromFlags(flags), "--etcd-endpoints", "ftp://etcd:2379"));
  flags.etcd_endpoints = "etcd-without-port";
  EXPECT_TRUE(
      RefusedNaming(ClusterConfigFromFlags(flags), "--etcd-endpoints", "etcd-without-port"));
  flags.etcd_endpoints = "http://etcd:99999";
  EXPECT_TRUE(RefusedNaming(ClusterConfigFromFlags(flags), "--etcd-endpoints", "99999"));
  flags.etcd_endpoints = " , ";
  EXPECT_TRUE(RefusedNaming(ClusterConfigFromFlags(flags), "--etcd-endpoints", "no etcd endpoint"));

  flags = MinimalFlags();
  flags.node_name = "bad/name";
  EXPECT_TRUE(RefusedNaming(ClusterConfigFromFlags(flags), "--node-name", "bad/name"));

  flags = MinimalFlags();
  flags.prefix = "tensord/";
  EXPECT_TRUE(RefusedNaming(ClusterConfigFromFlags(flags), "--etcd-prefix", "tensord/"));

  flags = MinimalFlags();
  flags.lease_ttl = absl::Milliseconds(1500);
  EXPECT_TRUE(RefusedNaming(ClusterConfigFromFlags(flags), "--etcd-lease-ttl", "1.5s"));
  flags.lease_ttl = absl::ZeroDuration();
  EXPECT_TRUE(RefusedNaming(ClusterConfigFromFlags(flags), "--etcd-lease-ttl", "0"));

  flags = MinimalFlags();
  flags.user = "tensord";
  EXPECT_TRUE(RefusedNaming(ClusterConfigFromFlags(flags), "--etcd-password-file", "tensord"));
  flags.password_file = "/nonexistent/password";
  EXPECT_TRUE(RefusedNaming(ClusterConfigFromFlags(flags), "--etcd-password-file",
                            "/nonexistent/password"));

  flags = MinimalFlags();
  flags.ca = "/nonexistent/ca.pem";
  absl::StatusOr<ClusterConfig> config = ClusterConfigFromFlags(flags);
  ASSERT_FALSE(config.ok());
  EXPECT_TRUE(absl::StrContains(config.status().message(), "--etcd-ca")) << config.status();
}

TEST(ClusterConfigTest, PasswordComesFromItsFileWithoutTheNewline) {
  char path[] = "/tmp/tensord-etcd-password-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "s3cret\n", 7), 7);
  close(fd);
  ClusterFlags flags = MinimalFlags();
  flags.user = "tensord";
  flags.password_file = path;
  absl::StatusOr<ClusterConfig> config = ClusterConfigFromFlags(flags);
  std::remove(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->etcd.user, "tensord");
  EXPECT_EQ(config->etcd.password, "s3cret");
}

TEST(ClusterConfigTest, TlsMaterialNeedsHttpsEndpoints) {
  EtcdClientOptions options;
  options.endpoints = {"http://etcd:2379"};
  options.ca_pem = "-----BEGIN CERTIFICATE-----\n";
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Create(options);
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(absl::StrContains(client.status().message(), "http://etcd:2379")) << client.status();
  options.endpoints = {"etcd:2379"};  // no scheme: https, because TLS material is given
  EXPECT_TRUE(EtcdClient::Create(options).ok());
  options.cert_pem = "-----BEGIN CERTIFICATE-----\n";
  EXPECT_FALSE(EtcdClient::Create(options).ok()) << "a certificate without its key";
}

TEST(ClusterConfigTest, AdvertiseAddressDefaultsToAReachableListenAddress) {
  const std::vector<std::string> local_etcd = {"http://127.0.0.1:2379"};
  const std::vector<std::string> remote_etcd = {"http://127.0.0.1:2379", "https://etcd-2:2379"};
  // The flag wins, unless it is a wildcard.
  EXPECT_EQ(*ChooseAdvertiseAddress("node-a.example:50051", {"0.0.0.0:50051"}, remote_etcd),
            "node-a.example:50051");
  absl::StatusOr<std::string> chosen = ChooseAdvertiseAddress("0.0.0.0:50051", {}, remote_etcd);
  ASSERT_FALSE(chosen.ok());
  EXPECT_TRUE(absl::StrContains(chosen.status().message(), "--advertise-address '0.0.0.0:50051'"));
  EXPECT_FALSE(ChooseAdvertiseAddress("node-a", {}, remote_etcd).ok()) << "no port";
  // Default: the first TCP listen address.
  EXPECT_EQ(*ChooseAdvertiseAddress("", {"unix:/run/t.sock", "10.1.2.3:50051"}, remote_etcd),
            "10.1.2.3:50051");
  // Loopback is fine when the whole cluster is on this host, not otherwise.
  EXPECT_EQ(*ChooseAdvertiseAddress("", {"127.0.0.1:4000"}, local_etcd), "127.0.0.1:4000");
  chosen = ChooseAdvertiseAddress("", {"127.0.0.1:4000"}, remote_etcd);
  ASSERT_FALSE(chosen.ok());
  EXPECT_TRUE(absl::StrContains(chosen.status().message(), "https://etcd-2:2379"))
      << chosen.status();
  // Wildcards and Unix-only listeners cannot be advertised.
  chosen = ChooseAdvertiseAddress("", {"0.0.0.0:50051"}, local_etcd);
  ASSERT_FALSE(chosen.ok());
  EXPECT_TRUE(absl::StrContains(chosen.status().message(), "0.0.0.0:50051")) << chosen.status();
  EXPECT_FALSE(ChooseAdvertiseAddress("", {"[::]:50051"}, local_etcd).ok());
  EXPECT_FALSE(ChooseAdvertiseAddress("", {"unix:/run/t.sock"}, local_etcd).ok());
}

// Before the server listens, --listen may still say port 0: the check
// takes it, and refuses the same hosts the choice after binding would.
TEST(ClusterConfigTest, AdvertiseCheckBeforeListeningAcceptsPortZeroAndRefusesWhatTheChoiceWould) {
  const std::vector<std::string> local_etcd = {"http://127.0.0.1:2379"};
  EXPECT_TRUE(CheckAdvertiseAddress("", {"127.0.0.1:0"}, local_etcd).ok());
  EXPECT_TRUE(CheckAdvertiseAddress("", {"unix:/run/t.sock", "[::1]:0"}, local_etcd).ok());
  EXPECT_TRUE(CheckAdvertiseAddress("node-a:50051", {"0.0.0.0:0"}, local_etcd).ok());
  absl::Status wildcard = CheckAdvertiseAddress("", {"0.0.0.0:0"}, local_etcd);
  EXPECT_TRUE(absl::StrContains(wildcard.message(), "'0.0.0.0:0' is a wildcard")) << wildcard;
  EXPECT_FALSE(CheckAdvertiseAddress("", {"unix:/run/t.sock"}, local_etcd).ok());
  EXPECT_FALSE(CheckAdvertiseAddress("0.0.0.0:50051", {"127.0.0.1:0"}, local_etcd).ok());
  // After binding, port 0 is no address at all.
  EXPECT_FALSE(ChooseAdvertiseAddress("", {"127.0.0.1:0"}, local_etcd).ok());
}

TEST(EtcdClientTest, PrefixRangeEndIsTheNextKeyAfterThePrefix) {
  EXPECT_EQ(KvPrefixEnd("/tensord/nodes/"), "/tensord/nodes0");
  EXPECT_EQ(KvPrefixEnd("a\xff"), "b");
  EXPECT_EQ(KvPrefixEnd("\xff\xff"), std::string(1, '\0'));
}

}  // namespace
}  // namespace tensord
