// TLS, mutual TLS, the plaintext-listener policy, bearer tokens and the
// stream limits, each against a real tensord process.
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/raw_stub.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_pki.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

std::unique_ptr<ServerProcess> StartServer(std::vector<std::string> flags) {
  ServerProcessOptions options;
  options.flags = std::move(flags);
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  if (!server.ok()) {
    ADD_FAILURE() << "tensord did not start: " << server.status();
    return nullptr;
  }
  return std::move(*server);
}

// SIGTERM must end the server with exit 0 and no sanitizer report (a
// sanitizer build reports leaks and races at exit).
void ExpectStopsCleanly(ServerProcess& server) {
  absl::StatusOr<int> status = server.Stop(SIGTERM, absl::Seconds(20));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << "tensord exited with wait status " << *status << ":\n"
      << server.StderrTail();
  EXPECT_EQ(server.Stderr().find("runtime error:"), std::string::npos) << server.StderrTail();
}

// The options of a remote client whose calls give up after 60 s (sanitizer
// builds are slow; refused handshakes fail at once anyway).
ClientOptions Remote() {
  ClientOptions options = RemoteClientOptions();
  options.timeout = absl::Seconds(60);
  return options;
}

absl::Status PutSmall(Client& client, const std::string& name) {
  HostTensor tensor = CompactTensor(kU8, {16}, PatternBytes(16, 7));
  return client.Put(name, tensor.dl()).status();
}

class SecurityTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<TestPki>> pki = TestPki::Create();
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = std::move(*pki);
  }
  static void TearDownTestSuite() { pki_.reset(); }
  void SetUp() override {
    if (pki_ == nullptr) GTEST_SKIP() << "no test certificates";
  }
  static std::vector<std::string> TlsFlags() {
    return {absl::StrCat("--tls-cert=", pki_->Path("server.pem")),
            absl::StrCat("--tls-key=", pki_->Path("server.key"))};
  }
  static inline std::unique_ptr<TestPki> pki_;
};

TEST_F(SecurityTlsTest, ServesOverTlsAndLocalHandoffDiscoveryStillWorks) {
  std::vector<std::string> flags = TlsFlags();
  flags.push_back(absl::StrCat("--handoff-socket=", pki_->Path("handoff.sock")));
  std::unique_ptr<ServerProcess> server = StartServer(flags);
  ASSERT_NE(server, nullptr);

  ClientOptions remote = Remote();
  remote.tls_root_ca = pki_->Path("ca.pem");
  std::unique_ptr<Client> client = ConnectClient(server->address(), remote);
  ASSERT_NE(client, nullptr);
  ExpectServing(*client);

  // kAuto learns the handoff socket through GetServerInfo over TLS.
  ClientOptions automatic;
  automatic.tls_root_ca = pki_->Path("ca.pem");
  automatic.timeout = absl::Seconds(60);
  std::unique_ptr<Client> local = ConnectClient(server->address(), automatic);
  ASSERT_NE(local, nullptr);
  EXPECT_TRUE(local->local());
  ExpectServing(*local);
  local.reset();
  ExpectStopsCleanly(*server);
}

TEST_F(SecurityTlsTest, ClientsThatCannotVerifyTheServerAreRefused) {
  std::unique_ptr<ServerProcess> server = StartServer(TlsFlags());
  ASSERT_NE(server, nullptr);

  std::unique_ptr<Client> plaintext = ConnectClient(server->address(), Remote());
  ASSERT_NE(plaintext, nullptr);
  EXPECT_TRUE(StatusIs(plaintext->Stat("any").status(), absl::StatusCode::kUnavailable));

  ClientOptions system_roots = Remote();
  system_roots.tls = true;  // without our CA
  std::unique_ptr<Client> unverified = ConnectClient(server->address(), system_roots);
  ASSERT_NE(unverified, nullptr);
  EXPECT_TRUE(StatusIs(unverified->Stat("any").status(), absl::StatusCode::kUnavailable));

  ClientOptions wrong_ca = Remote();
  wrong_ca.tls_root_ca = pki_->Path("other-ca.pem");
  std::unique_ptr<Client> misled = ConnectClient(server->address(), wrong_ca);
  ASSERT_NE(misled, nullptr);
  EXPECT_TRUE(StatusIs(misled->Stat("any").status(), absl::StatusCode::kUnavailable));
  ExpectStopsCleanly(*server);
}

TEST_F(SecurityTlsTest, MutualTlsNeedsAClientCertificateFromTheConfiguredCa) {
  std::vector<std::string> flags = TlsFlags();
  flags.push_back(absl::StrCat("--tls-client-ca=", pki_->Path("ca.pem")));
  std::unique_ptr<ServerProcess> server = StartServer(flags);
  ASSERT_NE(server, nullptr);

  ClientOptions no_cert = Remote();
  no_cert.tls_root_ca = pki_->Path("ca.pem");
  std::unique_ptr<Client> anonymous = ConnectClient(server->address(), no_cert);
  ASSERT_NE(anonymous, nullptr);
  EXPECT_TRUE(StatusIs(anonymous->Stat("any").status(), absl::StatusCode::kUnavailable));

  ClientOptions rogue = no_cert;
  rogue.tls_client_cert = pki_->Path("rogue-client.pem");
  rogue.tls_client_key = pki_->Path("rogue-client.key");
  std::unique_ptr<Client> impostor = ConnectClient(server->address(), rogue);
  ASSERT_NE(impostor, nullptr);
  EXPECT_TRUE(StatusIs(impostor->Stat("any").status(), absl::StatusCode::kUnavailable));

  ClientOptions trusted = no_cert;
  trusted.tls_client_cert = pki_->Path("client.pem");
  trusted.tls_client_key = pki_->Path("client.key");
  std::unique_ptr<Client> client = ConnectClient(server->address(), trusted);
  ASSERT_NE(client, nullptr);
  ExpectServing(*client);
  ExpectStopsCleanly(*server);
}

TEST(SecurityListenTest, PlaintextOnAWildcardAddressNeedsTheFlag) {
  ServerProcessOptions options;
  options.flags = {"--listen=0.0.0.0:0"};
  absl::StatusOr<std::unique_ptr<ServerProcess>> refused = ServerProcess::Start(options);
  ASSERT_FALSE(refused.ok())
      << "tensord served plaintext on 0.0.0.0 without --allow-insecure-remote";
  EXPECT_NE(refused.status().message().find("listen address '0.0.0.0:0'"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("--allow-insecure-remote"), std::string::npos);

  options.flags.push_back("--allow-insecure-remote");
  std::unique_ptr<ServerProcess> allowed = StartServer(options.flags);
  ASSERT_NE(allowed, nullptr);
  ExpectStopsCleanly(*allowed);
}

constexpr char kReaderToken[] = "reader-token-0123456789abcdef";
constexpr char kTeamAToken[] = "team-a-token-0123456789abcdef";
constexpr char kAdminToken[] = "admin-token-0123456789abcdef";

// Polls `condition` every 20 ms for up to 30 s.
template <typename Condition>
bool Eventually(Condition condition) {
  for (int i = 0; i < 1500; ++i) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return condition();
}

class SecurityTokenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    // The admin token is stored hashed: the file need not hold the secret.
    const std::string admin_digest_command =
        absl::StrCat("printf %s '", kAdminToken, "' | openssl dgst -sha256 -r | cut -d' ' -f1 > '",
                     dir_.File("admin.sha256"), "'");
    ASSERT_EQ(std::system(admin_digest_command.c_str()), 0);
    std::ifstream digest_file(dir_.File("admin.sha256"));
    std::string admin_digest;
    digest_file >> admin_digest;
    ASSERT_EQ(admin_digest.size(), 64u);
    WriteFile(dir_.File("tokens"),
              absl::StrCat("# test tokens\n", kReaderToken, " read\n", kTeamAToken,
                           " read,write team-a/\n", "sha256:", admin_digest, " admin\n"));
    server_ = StartServer({absl::StrCat("--tokens-file=", dir_.File("tokens"))});
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (server_ != nullptr) ExpectStopsCleanly(*server_);
  }

  std::unique_ptr<Client> ClientWithToken(std::string token) {
    ClientOptions options = Remote();
    options.bearer_token = std::move(token);
    return ConnectClient(server_->address(), options);
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(SecurityTokenTest, MissingOrUnknownTokensAreUnauthenticated) {
  std::unique_ptr<Client> anonymous = ClientWithToken("");
  std::unique_ptr<Client> stranger = ClientWithToken("not-a-known-token-0123456789");
  ASSERT_NE(anonymous, nullptr);
  ASSERT_NE(stranger, nullptr);
  for (Client* client : {anonymous.get(), stranger.get()}) {
    EXPECT_TRUE(StatusIs(client->Stat("any").status(), absl::StatusCode::kUnauthenticated, "Stat"));
    EXPECT_TRUE(StatusIs(PutSmall(*client, "any"), absl::StatusCode::kUnauthenticated, "Put"));
    EXPECT_TRUE(StatusIs(client->Fetch("any").status(), absl::StatusCode::kUnauthenticated));
    EXPECT_TRUE(StatusIs(client->List("").status(), absl::StatusCode::kUnauthenticated));
    // Health stays open for probes.
    absl::StatusOr<std::string> health = client->Health();
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, "SERVING");
  }
}

TEST_F(SecurityTokenTest, ReadOnlyTokenReadsButCannotWrite) {
  std::unique_ptr<Client> admin = ClientWithToken(kAdminToken);
  std::unique_ptr<Client> reader = ClientWithToken(kReaderToken);
  ASSERT_NE(admin, nullptr);
  ASSERT_NE(reader, nullptr);
  ASSERT_TRUE(PutSmall(*admin, "shared/w").ok());

  EXPECT_TRUE(reader->Fetch("shared/w").ok());
  EXPECT_TRUE(reader->Stat("shared/w").ok());
  EXPECT_TRUE(StatusIs(PutSmall(*reader, "shared/w"), absl::StatusCode::kPermissionDenied,
                       "Put needs permission write"));
  EXPECT_TRUE(StatusIs(reader->Delete("shared/w").status(), absl::StatusCode::kPermissionDenied,
                       "Delete of 'shared/w' needs permission write"));
  absl::StatusOr<TensorInfo> still = admin->Stat("shared/w");
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(still->version, admin->Stat("shared/w")->version);
  EXPECT_TRUE(admin->Delete("shared/w").ok());
}

TEST_F(SecurityTokenTest, NamespacedTokenTouchesOnlyItsPrefix) {
  std::unique_ptr<Client> admin = ClientWithToken(kAdminToken);
  std::unique_ptr<Client> team_a = ClientWithToken(kTeamAToken);
  ASSERT_NE(admin, nullptr);
  ASSERT_NE(team_a, nullptr);
  ASSERT_TRUE(PutSmall(*admin, "team-b/secret").ok());

  EXPECT_TRUE(PutSmall(*team_a, "team-a/mine").ok());
  EXPECT_TRUE(team_a->Fetch("team-a/mine").ok());
  EXPECT_TRUE(StatusIs(team_a->Fetch("team-b/secret").status(), absl::StatusCode::kPermissionDenied,
                       "Fetch of 'team-b/secret'"));
  EXPECT_TRUE(StatusIs(team_a->Stat("team-b/secret").status(), absl::StatusCode::kPermissionDenied,
                       "Stat of 'team-b/secret'"));
  EXPECT_TRUE(StatusIs(PutSmall(*team_a, "team-b/planted"), absl::StatusCode::kPermissionDenied,
                       "Put of 'team-b/planted'"));
  EXPECT_TRUE(StatusIs(team_a->Delete("team-b/secret").status(),
                       absl::StatusCode::kPermissionDenied, "Delete of 'team-b/secret'"));
  // The refused put published nothing.
  EXPECT_TRUE(StatusIs(admin->Stat("team-b/planted").status(), absl::StatusCode::kNotFound));

  // List narrows to the namespace, or refuses a disjoint prefix.
  absl::StatusOr<std::vector<TensorInfo>> listed = team_a->ListAll("");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "team-a/mine");
  EXPECT_TRUE(
      StatusIs(team_a->List("team-b/").status(), absl::StatusCode::kPermissionDenied, "team-b/"));

  // The admin sees and may do everything.
  absl::StatusOr<std::vector<TensorInfo>> everything = admin->ListAll("");
  ASSERT_TRUE(everything.ok()) << everything.status();
  EXPECT_EQ(everything->size(), 2u);
  EXPECT_TRUE(admin->Delete("team-a/mine").ok());
  EXPECT_TRUE(admin->Delete("team-b/secret").ok());
}

// A put in parts is joined only by parts with the first part's token: a
// part with another token is refused and the put goes on.
TEST_F(SecurityTokenTest, APartWithAnotherTokenCannotJoinAPutInParts) {
  std::unique_ptr<RawStub> stub = NewRawStub(server_->address());
  const std::string bytes = AsString(PatternBytes(2 << 20, 17));
  const std::string upload_id = "00000000000000000000000000c0ffee";
  auto part = [&](uint64_t offset) {
    return PartMessages("team-a/parted", bytes, upload_id, 2, offset, 1 << 20);
  };
  std::future<grpc::Status> first = std::async(
      std::launch::async, [&] { return RawPutPart(*stub, part(0), nullptr, true, kAdminToken); });
  // The second part under team-a's token, once the first has made the put
  // (before, it would make a put of its own and wait).
  ASSERT_TRUE(Eventually([&] {
    std::unique_ptr<grpc::ClientContext> context = RawContext();
    context->AddMetadata("authorization", absl::StrCat("Bearer ", kAdminToken));
    v1::GetServerInfoResponse info;
    return stub->GetServerInfo(context.get(), {}, &info).ok() &&
           info.host_bytes_used() >= bytes.size();
  }));
  grpc::Status stranger = RawPutPart(*stub, part(1 << 20), nullptr, true, kTeamAToken);
  EXPECT_TRUE(GrpcStatusIs(stranger, grpc::StatusCode::PERMISSION_DENIED, "another token"))
      << stranger.error_message();
  v1::PutResponse response;
  grpc::Status second = RawPutPart(*stub, part(1 << 20), &response, true, kAdminToken);
  ASSERT_TRUE(second.ok()) << second.error_message();
  ASSERT_TRUE(first.get().ok());
  EXPECT_EQ(response.info().total_bytes(), bytes.size());
}

// Far beyond the 64 KiB flow-control window of a small-window channel.
constexpr size_t kLargeTensorBytes = size_t{16} << 20;

// A fetch that has received its header and then stops reading: with
// BDP probing off the flow-control window stays at 64 KiB, so the server's
// next write cannot complete.
struct StalledFetch {
  std::unique_ptr<RawStub> stub;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReader<v1::FetchResponse>> reader;
};

// The server gives a finished stream's place back when the call is done on
// its side, which may be just after the client saw the answer (a put just
// before this, under --max-concurrent-streams=1): a refusal for that reason
// is retried, anything else fails the test.
StalledFetch StartStalledFetch(const std::string& address, const std::string& name) {
  for (int attempt = 0;; ++attempt) {
    StalledFetch fetch;
    fetch.stub = NewRawStub(address, /*small_window=*/true);
    fetch.context = RawContext();
    v1::FetchRequest request;
    request.set_name(name);
    fetch.reader = fetch.stub->Fetch(fetch.context.get(), request);
    v1::FetchResponse header;
    if (fetch.reader->Read(&header)) {
      EXPECT_TRUE(header.has_header());
      return fetch;
    }
    const grpc::Status status = fetch.reader->Finish();
    if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED || attempt == 100) {
      ADD_FAILURE() << "the fetch of " << name << " got no header: " << status.error_message();
      return fetch;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

class SecurityStreamTest : public ::testing::Test {
 protected:
  void StartWith(std::vector<std::string> flags) {
    server_ = StartServer(std::move(flags));
    ASSERT_NE(server_, nullptr);
    client_ = ConnectClient(server_->address(), RemoteClientOptions());
    ASSERT_NE(client_, nullptr);
    HostTensor large = CompactTensor(kU8, {static_cast<int64_t>(kLargeTensorBytes)},
                                     PatternBytes(kLargeTensorBytes, 3));
    ASSERT_TRUE(client_->Put("large", large.dl()).ok());
  }

  void TearDown() override {
    client_.reset();
    if (server_ != nullptr) ExpectStopsCleanly(*server_);
  }

  uint32_t OpenLeases() {
    absl::StatusOr<TensorInfo> info = client_->Stat("large");
    return info.ok() ? info->open_leases : ~0u;
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(SecurityStreamTest, StreamsBeyondTheLimitAreRefused) {
  StartWith({"--max-concurrent-streams=1"});
  StalledFetch first = StartStalledFetch(server_->address(), "large");
  EXPECT_TRUE(StatusIs(client_->Fetch("large").status(), absl::StatusCode::kResourceExhausted,
                       "--max-concurrent-streams"));
  HostTensor small = CompactTensor(kU8, {16}, PatternBytes(16, 1));
  EXPECT_TRUE(
      StatusIs(client_->Put("other", small.dl()).status(), absl::StatusCode::kResourceExhausted));
  // Unary calls are not streams.
  EXPECT_TRUE(client_->Stat("large").ok());

  first.context->TryCancel();
  first.reader->Finish();
  EXPECT_TRUE(Eventually([&] { return client_->Fetch("large").ok(); }))
      << "the cancelled stream's place was not given back";
}

TEST_F(SecurityStreamTest, StalledFetchIsCancelledAndReleasesItsLease) {
  StartWith({"--stream-idle-timeout=3s"});
  StalledFetch stalled = StartStalledFetch(server_->address(), "large");
  EXPECT_EQ(OpenLeases(), 1u);
  EXPECT_TRUE(Eventually([&] { return OpenLeases() == 0; }))
      << "the stalled fetch still holds its lease; server log:\n"
      << server_->StderrTail();
  EXPECT_NE(server_->Stderr().find("event=stream_idle_cancelled rpc=Fetch"), std::string::npos);
  // The reader, resuming, learns that its stream is gone.
  v1::FetchResponse message;
  for (int i = 0; i < 64 && stalled.reader->Read(&message); ++i) {
  }
  EXPECT_FALSE(stalled.reader->Finish().ok());
  ExpectServing(*client_);
}

TEST_F(SecurityStreamTest, StalledPutIsCancelledAndPublishesNothing) {
  StartWith({"--stream-idle-timeout=3s"});
  v1::GetServerInfoResponse before;
  std::unique_ptr<RawStub> stub = NewRawStub(server_->address());
  {
    std::unique_ptr<grpc::ClientContext> context = RawContext();
    ASSERT_TRUE(stub->GetServerInfo(context.get(), {}, &before).ok());
  }
  std::unique_ptr<grpc::ClientContext> context = RawContext();
  v1::PutResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::PutRequest>> writer = stub->Put(context.get(), &response);
  ASSERT_TRUE(writer->Write(HeaderMessage("stalled", RawDataType(1, 8), {16 << 20}, 16 << 20)));
  ASSERT_TRUE(writer->Write(ChunkMessage(0, std::string(1 << 20, 'x'))));
  // ... and nothing more.
  auto host_bytes_used = [&] {
    v1::GetServerInfoResponse info;
    std::unique_ptr<grpc::ClientContext> info_context = RawContext();
    return stub->GetServerInfo(info_context.get(), {}, &info).ok() ? info.host_bytes_used()
                                                                   : ~uint64_t{0};
  };
  EXPECT_TRUE(Eventually([&] {
    return server_->Stderr().find("event=stream_idle_cancelled rpc=Put") != std::string::npos;
  })) << server_->StderrTail();
  EXPECT_TRUE(Eventually([&] { return host_bytes_used() == before.host_bytes_used(); }))
      << "the cancelled put still holds its reservation";
  EXPECT_FALSE(writer->Finish().ok());
  EXPECT_TRUE(StatusIs(client_->Stat("stalled").status(), absl::StatusCode::kNotFound));
}

// A part whose bytes are in waits for the others: kept while another part
// moves, cancelled at the idle timeout once none does, failing the put.
TEST_F(SecurityStreamTest, AWaitingPartLivesWhileAnotherMovesAndFailsThePutWhenNoneDoes) {
  StartWith({"--stream-idle-timeout=2s"});
  std::unique_ptr<RawStub> stub = NewRawStub(server_->address());
  const std::string bytes = AsString(PatternBytes(2 << 20, 23));
  const std::string moving_id = "000000000000000000000000000000aa";
  std::future<grpc::Status> waiting = std::async(std::launch::async, [&] {
    return RawPutPart(*stub, PartMessages("slow", bytes, moving_id, 2, 0, 1 << 20));
  });
  // The other part moves one chunk a second, for longer than the timeout.
  std::vector<v1::PutRequest> slow = PartMessages("slow", bytes, moving_id, 2, 1 << 20, 1 << 20);
  {
    std::unique_ptr<grpc::ClientContext> context = RawContext();
    v1::PutResponse response;
    std::unique_ptr<grpc::ClientWriter<v1::PutRequest>> writer =
        stub->PutPart(context.get(), &response);
    for (size_t i = 0; i < slow.size(); ++i) {
      ASSERT_TRUE(writer->Write(slow[i])) << "message " << i;
      if (i >= 1 && i < 4) absl::SleepFor(absl::Seconds(1));
    }
    writer->WritesDone();
    grpc::Status moved = writer->Finish();
    ASSERT_TRUE(moved.ok()) << moved.error_message();
  }
  grpc::Status kept = waiting.get();
  EXPECT_TRUE(kept.ok()) << "the waiting part was cancelled while the other moved: "
                         << kept.error_message();
  EXPECT_TRUE(client_->Stat("slow").ok());

  // Now the other part never comes.
  const std::string lone_id = "000000000000000000000000000000bb";
  grpc::Status alone = RawPutPart(*stub, PartMessages("lonely", bytes, lone_id, 2, 0, 1 << 20));
  EXPECT_TRUE(GrpcStatusIs(alone, grpc::StatusCode::ABORTED, "stream idle timeout"))
      << alone.error_message();
  EXPECT_TRUE(StatusIs(client_->Stat("lonely").status(), absl::StatusCode::kNotFound));
  absl::StatusOr<TensorInfo> large = client_->Stat("large");
  absl::StatusOr<TensorInfo> kept_info = client_->Stat("slow");
  ASSERT_TRUE(large.ok() && kept_info.ok());
  // Freed once the failed put's last call is done on the server's side,
  // which may be just after its client has the answer.
  uint64_t used = 0;
  EXPECT_TRUE(Eventually([&] {
    v1::GetServerInfoResponse info;
    std::unique_ptr<grpc::ClientContext> info_context = RawContext();
    used = stub->GetServerInfo(info_context.get(), {}, &info).ok() ? info.host_bytes_used() : 0;
    return used == large->total_bytes + kept_info->total_bytes;
  })) << "the failed put still holds its bytes: "
      << used;
}

}  // namespace
}  // namespace tensord::testing
