// Cluster membership against a real etcd (/usr/bin/etcd): nodes join and
// see each other, leave within their lease TTL when killed and at once when
// stopped, keep answering while etcd is down (refusing what etcd must
// order) and are listed again when it is back, and a name held by a live
// node is refused.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/cluster/etcd_client.h"
#include "service/common/scoped_fd.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/cluster_test_support.h"
#include "tests/integration/raw_stub.h"
#include "tests/integration/test_pki.h"
#include "tests/integration/test_support.h"
#include "tests/process/etcd_process.h"

namespace tensord::testing {
namespace {

// etcd checks for expired leases every 500 ms and a node rereads the member
// list every TTL/3: a killed node may stay listed that much past its TTL.
constexpr absl::Duration kExpirySlack = absl::Milliseconds(1500);

class ClusterMembershipTest : public EtcdClusterTest {
 protected:
  absl::StatusOr<std::unique_ptr<ServerProcess>> StartNode(const std::string& name) {
    ServerProcessOptions options;
    options.flags = NodeFlags(name);
    return ServerProcess::Start(options);
  }

  // The member names `node` reports (Client::ClusterNodes), or {"<error>"}.
  static std::set<std::string> MembersSeenBy(ServerProcess& node) {
    std::unique_ptr<Client> client = ConnectClient(node.address(), RemoteClientOptions());
    if (client == nullptr) return {"<error: no client>"};
    absl::StatusOr<ClusterMembers> members = client->ClusterNodes();
    if (!members.ok()) return {absl::StrCat("<error: ", members.status().message(), ">")};
    std::set<std::string> names;
    for (const ClusterNode& member : members->nodes) names.insert(member.name);
    return names;
  }

  // Waits (bounded) until `node` reports exactly `expected`; how long it took.
  static absl::StatusOr<absl::Duration> WaitForMembers(ServerProcess& node,
                                                       const std::set<std::string>& expected,
                                                       absl::Duration timeout) {
    const absl::Time start = absl::Now();
    std::set<std::string> seen;
    const bool reached = WaitUntil(
        [&] {
          seen = MembersSeenBy(node);
          return seen == expected;
        },
        timeout);
    if (!reached) {
      return absl::DeadlineExceededError(
          absl::StrCat("after ", absl::FormatDuration(timeout), " the node sees {",
                       absl::StrJoin(seen, ","), "}, not {", absl::StrJoin(expected, ","), "}"));
    }
    return absl::Now() - start;
  }
};

TEST_F(ClusterMembershipTest, ThreeNodesJoinAndSeeEachOther) {
  std::vector<std::unique_ptr<ServerProcess>> nodes;
  for (const char* name : {"node-a", "node-b", "node-c"}) {
    ServerProcessOptions options;
    options.flags = NodeFlags(name);
    options.flags.push_back("--metrics-listen=127.0.0.1:0");
    absl::StatusOr<std::unique_ptr<ServerProcess>> node = ServerProcess::Start(options);
    ASSERT_TRUE(node.ok()) << node.status();
    nodes.push_back(std::move(*node));
  }
  const std::set<std::string> all = {"node-a", "node-b", "node-c"};
  for (auto& node : nodes) {
    absl::StatusOr<absl::Duration> waited = WaitForMembers(*node, all, absl::Seconds(10));
    ASSERT_TRUE(waited.ok()) << waited.status() << "\n" << node->StderrTail();
  }
  // Each record says what the node registered: its name, its address.
  std::unique_ptr<RawStub> service = NewRawStub(nodes[1]->address());
  v1::GetServerInfoResponse info;
  ASSERT_TRUE(service->GetServerInfo(RawContext().get(), {}, &info).ok());
  EXPECT_EQ(info.node_name(), "node-b");
  ASSERT_EQ(info.cluster_members_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const v1::ClusterMember& member = info.cluster_members(i);
    EXPECT_EQ(member.advertise_address(), nodes[i]->address()) << member.node_name();
    EXPECT_FALSE(member.handoff_available()) << "the test servers run --handoff-socket=off";
    EXPECT_FALSE(member.server_version().empty());
    EXPECT_GT(member.host_bytes_limit(), 0u);
    EXPECT_GT(member.start_time_unix_ms(), 0);
  }
  // The metrics count the members seen and no etcd error.
  absl::StatusOr<std::string> scraped =
      HttpGet(LogField(nodes[2]->Stderr(), "metrics_serving", "address"), "/metrics");
  ASSERT_TRUE(scraped.ok()) << scraped.status();
  EXPECT_TRUE(absl::StrContains(*scraped, "\ntensord_cluster_members 3\n")) << *scraped;
  EXPECT_TRUE(absl::StrContains(*scraped, "\ntensord_etcd_errors_total 0\n")) << *scraped;
}

TEST_F(ClusterMembershipTest, ClientAndTensorctlListTheNodes) {
  std::vector<std::unique_ptr<ServerProcess>> nodes;
  for (const char* name : {"node-a", "node-b"}) {
    absl::StatusOr<std::unique_ptr<ServerProcess>> node = StartNode(name);
    ASSERT_TRUE(node.ok()) << node.status();
    nodes.push_back(std::move(*node));
  }
  ASSERT_TRUE(WaitForMembers(*nodes[0], {"node-a", "node-b"}, absl::Seconds(10)).ok());

  ClientOptions options;
  options.server = nodes[0]->address();
  options.timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<ClusterMembers> members = (*client)->ClusterNodes();
  ASSERT_TRUE(members.ok()) << members.status();
  EXPECT_EQ(members->node_name, "node-a");
  ASSERT_EQ(members->nodes.size(), 2u);
  EXPECT_EQ(members->nodes[1].name, "node-b");
  EXPECT_EQ(members->nodes[1].advertise_address, nodes[1]->address());
  EXPECT_GT(members->nodes[1].started, absl::Now() - absl::Minutes(5));

  // tensorctl nodes prints one row per node, marking the one asked.
  const std::string command =
      absl::StrCat(TENSORCTL_BINARY_PATH, " --server ", nodes[1]->address(), " nodes 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  for (int reads = 0; reads < 64; ++reads) {
    const size_t got = fread(buffer, 1, sizeof(buffer), pipe);
    if (got == 0) break;
    output.append(buffer, got);
  }
  const int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "node-b *")) << output;
  EXPECT_TRUE(absl::StrContains(output, nodes[0]->address())) << output;
  EXPECT_TRUE(absl::StrContains(output, "2 nodes")) << output;
}

TEST_F(ClusterMembershipTest, KilledNodeLeavesWithinItsTtlAndStoppedNodeAtOnce) {
  std::vector<std::unique_ptr<ServerProcess>> nodes;
  for (const char* name : {"node-a", "node-b", "node-c"}) {
    absl::StatusOr<std::unique_ptr<ServerProcess>> node = StartNode(name);
    ASSERT_TRUE(node.ok()) << node.status();
    nodes.push_back(std::move(*node));
  }
  ASSERT_TRUE(WaitForMembers(*nodes[0], {"node-a", "node-b", "node-c"}, absl::Seconds(10)).ok());

  // kill -9: nothing revokes the lease; etcd drops it when the TTL runs out.
  absl::StatusOr<int> killed = nodes[2]->Stop(SIGKILL);
  ASSERT_TRUE(killed.ok()) << killed.status();
  absl::StatusOr<absl::Duration> gone =
      WaitForMembers(*nodes[0], {"node-a", "node-b"}, kTtl + kExpirySlack + absl::Seconds(5));
  ASSERT_TRUE(gone.ok()) << gone.status();
  std::cout << "[ measured ] a SIGKILLed node left the member list after "
            << absl::FormatDuration(*gone) << " (TTL " << absl::FormatDuration(kTtl) << ")\n";
  EXPECT_LE(*gone, kTtl + kExpirySlack) << "a killed node must leave within its lease TTL";

  // SIGTERM: the node revokes its lease as it stops, so it leaves at once
  // (the survivors reread the list every TTL/3), long before its TTL.
  absl::StatusOr<int> stopped = nodes[1]->Stop(SIGTERM);
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_TRUE(WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0) << nodes[1]->StderrTail();
  EXPECT_TRUE(absl::StrContains(nodes[1]->Stderr(), "event=cluster_left"))
      << nodes[1]->StderrTail();
  absl::StatusOr<absl::Duration> left = WaitForMembers(*nodes[0], {"node-a"}, absl::Seconds(5));
  ASSERT_TRUE(left.ok()) << left.status();
  std::cout << "[ measured ] a SIGTERMed node left the member list after "
            << absl::FormatDuration(*left) << "\n";
  EXPECT_LT(*left, kTtl / 3 + absl::Milliseconds(700));
}

TEST_F(ClusterMembershipTest, NodesKeepServingWhileEtcdIsDownAndAreListedWhenItReturns) {
  std::vector<std::unique_ptr<ServerProcess>> nodes;
  for (const char* name : {"node-a", "node-b"}) {
    ServerProcessOptions options;
    options.flags = NodeFlags(name);
    options.flags.push_back("--metrics-listen=127.0.0.1:0");
    absl::StatusOr<std::unique_ptr<ServerProcess>> node = ServerProcess::Start(options);
    ASSERT_TRUE(node.ok()) << node.status();
    nodes.push_back(std::move(*node));
  }
  ASSERT_TRUE(WaitForMembers(*nodes[0], {"node-a", "node-b"}, absl::Seconds(10)).ok());

  ASSERT_TRUE(etcd_->Stop(SIGKILL).ok());
  // Longer than the TTL: every renewal in between fails.
  const absl::Time outage_end = absl::Now() + kTtl + absl::Seconds(2);
  int round = 0;
  while (absl::Now() < outage_end && round < 100) {
    for (auto& node : nodes) {
      // The nodes go on answering: a durable put, which etcd must order,
      // is refused by name (never acknowledged unordered).
      std::unique_ptr<RawStub> service = NewRawStub(node->address());
      const std::string name = absl::StrCat("outage/", round);
      const grpc::Status put = RawPutBytes(*service, name, "needs etcd");
      ASSERT_EQ(put.error_code(), grpc::StatusCode::UNAVAILABLE) << node->StderrTail();
      EXPECT_TRUE(absl::StrContains(put.error_message(), "etcd")) << put.error_message();
    }
    ++round;
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_GT(round, 3);
  for (auto& node : nodes) ASSERT_TRUE(node->Alive()) << node->StderrTail();

  ASSERT_TRUE(etcd_->Restart().ok()) << etcd_->LogTail();
  for (auto& node : nodes) {
    // The member list a node reports is the last one it read, so during
    // the outage it still lists both: wait for the renewal that succeeded.
    ASSERT_TRUE(
        WaitUntil([&] { return absl::StrContains(node->Stderr(), "event=etcd_reachable_again"); },
                  absl::Seconds(20)))
        << node->StderrTail();
    absl::StatusOr<absl::Duration> back =
        WaitForMembers(*node, {"node-a", "node-b"}, absl::Seconds(5));
    ASSERT_TRUE(back.ok()) << back.status() << "\n" << node->StderrTail();
    // Logged once for the whole outage, not once per failed renewal.
    const std::string log = node->Stderr();
    EXPECT_EQ(CountOccurrences(log, "event=etcd_unreachable "), 1u) << log;
    // Every failed renewal of the outage was counted.
    absl::StatusOr<std::string> scraped =
        HttpGet(LogField(log, "metrics_serving", "address"), "/metrics");
    ASSERT_TRUE(scraped.ok()) << scraped.status();
    EXPECT_FALSE(absl::StrContains(*scraped, "\ntensord_etcd_errors_total 0\n")) << *scraped;
    EXPECT_TRUE(absl::StrContains(*scraped, "\ntensord_etcd_errors_total ")) << *scraped;
  }
  // Registered for real: the record survives a renewal round and more.
  absl::SleepFor(kTtl + absl::Milliseconds(500));
  EXPECT_EQ(MembersSeenBy(*nodes[1]), (std::set<std::string>{"node-a", "node-b"}));
}

// etcd may lose a node's lease (it expired during a partition, or an
// operator revoked it): the record goes with it, and the node must take a
// new lease and register again by itself.
TEST_F(ClusterMembershipTest, NodeWhoseLeaseIsGoneRegistersAgainUnderANewLease) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> node = StartNode("node-a");
  ASSERT_TRUE(node.ok()) << node.status();
  absl::StatusOr<std::unique_ptr<ServerProcess>> watcher = StartNode("node-b");
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  ASSERT_TRUE(WaitForMembers(**watcher, {"node-a", "node-b"}, absl::Seconds(10)).ok());

  absl::StatusOr<std::unique_ptr<EtcdClient>> etcd =
      EtcdClient::Create(EtcdClientOptions{.endpoints = {etcd_->endpoint()}});
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  absl::StatusOr<std::optional<EtcdKeyValue>> record = KvGet(**etcd, "/tensord-test/nodes/node-a");
  ASSERT_TRUE(record.ok() && record->has_value()) << record.status();
  const int64_t first_lease = (*record)->lease;
  ASSERT_NE(first_lease, 0);
  ASSERT_TRUE((*etcd)->RevokeLease(first_lease).ok());

  // Registered again within a renewal period or two, under another lease.
  std::optional<EtcdKeyValue> again;
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<std::optional<EtcdKeyValue>> now =
            KvGet(**etcd, "/tensord-test/nodes/node-a");
        if (!now.ok() || !now->has_value()) return false;
        again = **now;
        return true;
      },
      kTtl * 2))
      << (*node)->StderrTail();
  EXPECT_NE(again->lease, first_lease);
  EXPECT_TRUE(absl::StrContains((*node)->Stderr(), "event=cluster_lease_lost"))
      << (*node)->StderrTail();
  EXPECT_TRUE(WaitForMembers(**watcher, {"node-a", "node-b"}, absl::Seconds(5)).ok());
}

TEST_F(ClusterMembershipTest, FailsOverPastADeadEndpoint) {
  ServerProcessOptions options;
  options.flags = NodeFlags("node-a");
  // Port 1 on loopback: nothing listens; the real etcd comes second.
  options.flags[0] = "--etcd-endpoints=http://127.0.0.1:1," + etcd_->endpoint();
  absl::StatusOr<std::unique_ptr<ServerProcess>> node = ServerProcess::Start(options);
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_TRUE(WaitForMembers(**node, {"node-a"}, absl::Seconds(10)).ok());
  // Still listed a few renewals later: renewals fail over too.
  absl::SleepFor(kTtl + absl::Milliseconds(500));
  EXPECT_EQ(MembersSeenBy(**node), (std::set<std::string>{"node-a"})) << (*node)->StderrTail();
}

// Runs etcdctl against the test's etcd; its exit status.
int Etcdctl(const EtcdProcess& etcd, const std::string& arguments) {
  const std::string command =
      absl::StrCat("ETCDCTL_API=3 ", kEtcdctlBinary, " --endpoints=", etcd.endpoint(), " ",
                   arguments, " >/dev/null 2>&1");
  return std::system(command.c_str());
}

TEST_F(ClusterMembershipTest, AuthenticatesWithUserAndPasswordFile) {
  if (access(kEtcdctlBinary, X_OK) != 0) {
    GTEST_SKIP() << kEtcdctlBinary << " is absent (package etcd-client): cannot enable etcd auth";
  }
  ASSERT_EQ(Etcdctl(*etcd_, "user add root:root-password"), 0);
  ASSERT_EQ(Etcdctl(*etcd_, "auth enable"), 0);
  const std::string password_file = absl::StrCat(::testing::TempDir(), "/etcd-password-", getpid());
  {
    std::ofstream out(password_file);
    out << "root-password\n";
  }
  ServerProcessOptions options;
  options.flags = NodeFlags("node-a");
  options.flags.push_back("--etcd-user=root");
  options.flags.push_back("--etcd-password-file=" + password_file);
  absl::StatusOr<std::unique_ptr<ServerProcess>> node = ServerProcess::Start(options);
  ASSERT_TRUE(node.ok()) << node.status();
  ASSERT_TRUE(WaitForMembers(**node, {"node-a"}, absl::Seconds(10)).ok());

  // Without credentials etcd refuses, and the start says why.
  absl::StatusOr<std::unique_ptr<ServerProcess>> anonymous = StartNode("node-b");
  ASSERT_FALSE(anonymous.ok());
  EXPECT_TRUE(absl::StrContains(anonymous.status().message(), "cluster_join_failed"))
      << anonymous.status();
  // A wrong password is refused naming the user.
  {
    std::ofstream out(password_file);
    out << "wrong\n";
  }
  options.flags = NodeFlags("node-c");
  options.flags.push_back("--etcd-user=root");
  options.flags.push_back("--etcd-password-file=" + password_file);
  absl::StatusOr<std::unique_ptr<ServerProcess>> wrong = ServerProcess::Start(options);
  ASSERT_FALSE(wrong.ok());
  EXPECT_TRUE(absl::StrContains(wrong.status().message(), "user 'root'")) << wrong.status();
  std::remove(password_file.c_str());
}

// The ports a test's etcd listens on are picked together: each is distinct
// and free (a CI run once got the same port for etcd's client and peer
// listeners when they were picked one after the other).
TEST(FreeLoopbackPortsTest, PicksDistinctPortsThatAreFreeAgain) {
  constexpr int kCount = 64;
  absl::StatusOr<std::vector<int>> ports = FreeLoopbackPorts(kCount);
  ASSERT_TRUE(ports.ok()) << ports.status();
  ASSERT_EQ(ports->size(), kCount);
  EXPECT_EQ(std::set<int>(ports->begin(), ports->end()).size(), kCount);
  for (int port : *ports) {
    ScopedFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_TRUE(fd.valid());
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0)
        << "port " << port << ": " << std::strerror(errno);
  }
}

// etcd serving https only and requiring client certificates: a node with
// --etcd-ca, --etcd-cert and --etcd-key joins; one without a certificate
// does not.
TEST(ClusterTlsTest, JoinsAnEtcdThatRequiresClientCertificates) {
  if (!EtcdProcess::Available()) GTEST_SKIP() << kEtcdBinary << " is absent";
  absl::StatusOr<std::unique_ptr<TestPki>> pki = TestPki::Create();
  ASSERT_TRUE(pki.ok()) << pki.status();
  absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd =
      EtcdProcess::Start(absl::Seconds(30), EtcdTls{.cert_file = (*pki)->Path("server.pem"),
                                                    .key_file = (*pki)->Path("server.key"),
                                                    .client_ca_file = (*pki)->Path("ca.pem")});
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const std::string endpoint = (*etcd)->endpoint();
  ASSERT_TRUE(absl::StartsWith(endpoint, "https://")) << endpoint;
  // Wait for etcd's election through the client the node uses.
  EtcdClientOptions client_options;
  client_options.endpoints = {endpoint};
  for (auto [file, out] : {std::pair<const char*, std::string*>{"ca.pem", &client_options.ca_pem},
                           {"client.pem", &client_options.cert_pem},
                           {"client.key", &client_options.key_pem}}) {
    std::ifstream in((*pki)->Path(file));
    std::stringstream contents;
    contents << in.rdbuf();
    *out = contents.str();
  }
  absl::StatusOr<std::unique_ptr<EtcdClient>> probe = EtcdClient::Create(client_options);
  ASSERT_TRUE(probe.ok()) << probe.status();
  absl::Status probed;
  ASSERT_TRUE(WaitUntil(
      [&] {
        probed = KvGet(**probe, "/probe").status();
        return probed.ok();
      },
      absl::Seconds(20)))
      << probed << "\n"
      << (*etcd)->LogTail();

  ServerProcessOptions options;
  options.flags = {"--etcd-endpoints=" + endpoint,
                   "--node-name=tls-node",
                   "--etcd-lease-ttl=2s",
                   "--etcd-ca=" + (*pki)->Path("ca.pem"),
                   "--etcd-cert=" + (*pki)->Path("client.pem"),
                   "--etcd-key=" + (*pki)->Path("client.key")};
  absl::StatusOr<std::unique_ptr<ServerProcess>> node = ServerProcess::Start(options);
  ASSERT_TRUE(node.ok()) << node.status();
  absl::StatusOr<std::optional<EtcdKeyValue>> record = KvGet(**probe, "/tensord/nodes/tls-node");
  ASSERT_TRUE(record.ok() && record->has_value()) << record.status();

  // The CA alone (no client certificate) is not let in.
  options.flags = {"--etcd-endpoints=" + endpoint, "--node-name=no-cert",
                   "--etcd-ca=" + (*pki)->Path("ca.pem")};
  absl::StatusOr<std::unique_ptr<ServerProcess>> refused = ServerProcess::Start(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "cluster_join_failed"))
      << refused.status();
}

TEST_F(ClusterMembershipTest, NameHeldByALiveNodeIsRefusedNamingBoth) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> first = StartNode("node-a");
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<ServerProcess>> second = StartNode("node-a");
  ASSERT_FALSE(second.ok()) << "a second node-a was let in";
  const std::string error(second.status().message());
  EXPECT_TRUE(absl::StrContains(error, "exited with code 1")) << error;
  EXPECT_TRUE(absl::StrContains(error, "already registered")) << error;
  EXPECT_TRUE(absl::StrContains(error, (*first)->address())) << error;
  // The first node is untouched and still listed alone.
  EXPECT_EQ(MembersSeenBy(**first), (std::set<std::string>{"node-a"}));
}

TEST(ClusterFlagsTest, ClusterFlagWithoutEtcdIsRefusedNamingIt) {
  ServerProcessOptions options;
  options.flags = {"--node-name=lonely"};
  absl::StatusOr<std::unique_ptr<ServerProcess>> node = ServerProcess::Start(options);
  ASSERT_FALSE(node.ok());
  EXPECT_TRUE(absl::StrContains(node.status().message(), "exited with code 2")) << node.status();
  EXPECT_TRUE(absl::StrContains(node.status().message(), "--node-name is set but --etcd-endpoints"))
      << node.status();
}

TEST(ClusterFlagsTest, UnreachableEtcdStopsTheStartNamingTheEndpoint) {
  ServerProcessOptions options;
  // Port 1 on loopback: nothing listens there.
  options.flags = {"--etcd-endpoints=http://127.0.0.1:1", "--node-name=nobody"};
  absl::StatusOr<std::unique_ptr<ServerProcess>> node = ServerProcess::Start(options);
  ASSERT_FALSE(node.ok());
  EXPECT_TRUE(absl::StrContains(node.status().message(), "exited with code 1")) << node.status();
  EXPECT_TRUE(absl::StrContains(node.status().message(), "127.0.0.1:1")) << node.status();
}

}  // namespace
}  // namespace tensord::testing
