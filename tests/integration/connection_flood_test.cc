// Connection floods against a real tensord started with a small
// RLIMIT_NOFILE (as `prlimit --nofile=N:N` would): idle TCP and Unix
// connections, half-sent HTTP/2 prefaces, TLS handshakes that never finish
// and handoff-socket connections, each beyond the caps. During a flood an
// already-connected client keeps fetching; within a second after it a new
// client round-trips a tensor byte-exact. Also: fd exhaustion during a put
// or a local create is RESOURCE_EXHAUSTED naming the limit, logged once per
// episode.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/common/scoped_fd.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_pki.h"
#include "tests/integration/test_support.h"

namespace tensord::testing {
namespace {

// Small enough that a bounded flood reaches every cap and the fd limit.
constexpr uint64_t kOpenFileLimit = 128;

// Opens a stream (TCP or Unix) or, for `seqpacket`, a handoff-socket
// connection to `address` and sends `first_bytes`; invalid on failure.
ScopedFd OpenConnection(const std::string& address, std::string_view first_bytes,
                        bool seqpacket = false) {
  ScopedFd fd;
  if (absl::StartsWith(address, "unix:")) {
    sockaddr_un target{};
    target.sun_family = AF_UNIX;
    const std::string path = address.substr(5);
    std::memcpy(target.sun_path, path.data(), std::min(path.size(), sizeof(target.sun_path) - 1));
    fd.Reset(::socket(AF_UNIX, (seqpacket ? SOCK_SEQPACKET : SOCK_STREAM) | SOCK_CLOEXEC, 0));
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
      return ScopedFd();
    }
  } else {
    const size_t colon = address.rfind(':');
    uint32_t port = 0;
    if (!absl::SimpleAtoi(address.substr(colon + 1), &port)) return ScopedFd();
    sockaddr_in target{};
    target.sin_family = AF_INET;
    target.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &target.sin_addr);
    fd.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
      return ScopedFd();
    }
  }
  if (!first_bytes.empty() &&
      ::send(fd.get(), first_bytes.data(), first_bytes.size(), MSG_NOSIGNAL) < 0) {
    return ScopedFd();
  }
  return fd;
}

std::vector<ScopedFd> Flood(const std::string& address, int count, std::string_view first_bytes,
                            bool seqpacket = false) {
  std::vector<ScopedFd> connections;
  for (int i = 0; i < count; ++i) {
    ScopedFd fd = OpenConnection(address, first_bytes, seqpacket);
    if (fd.valid()) connections.push_back(std::move(fd));
  }
  return connections;
}

// True once the server has closed `fd` (end of file or reset), reading and
// dropping whatever it sent first (SETTINGS, a GOAWAY).
bool ClosedByServer(int fd) {
  char buffer[4096];
  while (true) {
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (got == 0) return true;
    if (got < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  }
}

size_t CountClosed(const std::vector<ScopedFd>& connections) {
  size_t closed = 0;
  for (const ScopedFd& fd : connections) closed += ClosedByServer(fd.get()) ? 1 : 0;
  return closed;
}

// Waits up to `timeout` for at least `wanted` of `connections` to be closed
// by the server; returns how many were.
size_t WaitForClosed(const std::vector<ScopedFd>& connections, size_t wanted,
                     absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  size_t closed = CountClosed(connections);
  while (closed < wanted && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
    closed = CountClosed(connections);
  }
  return closed;
}

size_t CountLines(const std::string& log, std::string_view needle) {
  size_t count = 0;
  for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) {
    ++count;
  }
  return count;
}

// Fetches `name` and checks its bytes.
void ExpectFetches(Client& client, const std::string& name, const HostTensor& expected) {
  absl::StatusOr<Tensor> fetched = client.Fetch(name);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  std::vector<uint8_t> bytes = TensorBytes(*fetched);
  EXPECT_TRUE(BytesEqual(bytes.data(), bytes.size(), expected.storage));
}

// The server's open fds, from /proc.
size_t ServerFds(ServerProcess& server) {
  return CountOpenFds(absl::StrCat("/proc/", server.pid(), "/fd"));
}

// Closes the flood, then waits (at most 10 s) until the server has closed
// its side too: its fd count is back to `baseline` (plus `slack`).
void EndFlood(std::vector<ScopedFd>& flood, ServerProcess& server, size_t baseline,
              size_t slack = 2) {
  flood.clear();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (ServerFds(server) > baseline + slack && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_LE(ServerFds(server), baseline + slack) << "the server kept the flood's fds";
}

// A new client, connected once the server's fds are free again, must
// round-trip a tensor byte-exact within one second.
void ExpectNewClientWithinOneSecond(const std::string& address, ClientOptions options,
                                    const std::string& stem) {
  const absl::Time start = absl::Now();
  options.timeout = absl::Seconds(1);
  std::unique_ptr<Client> client = ConnectClient(address, options);
  ASSERT_NE(client, nullptr);
  const std::string name = TestTensorName(stem);
  HostTensor tensor = CompactTensor(kU8, {8192}, PatternBytes(8192, 77));
  absl::StatusOr<TensorInfo> put = client->Put(name, tensor.dl());
  ASSERT_TRUE(put.ok()) << "a new client could not put after the flood: " << put.status();
  ExpectFetches(*client, name, tensor);
  EXPECT_LE(absl::Now() - start, absl::Seconds(1));
}

std::unique_ptr<ServerProcess> StartLimited(Transport transport, std::vector<std::string> flags) {
  ServerProcessOptions options;
  options.transport = transport;
  options.open_file_limit = kOpenFileLimit;
  options.flags = std::move(flags);
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(options);
  if (!server.ok()) {
    ADD_FAILURE() << "tensord did not start: " << server.status();
    return nullptr;
  }
  return std::move(*server);
}

class ConnectionFloodTest : public ::testing::TestWithParam<Transport> {
 protected:
  // A client connected before the flood, holding a tensor it fetches
  // during it.
  void ConnectEstablished(ServerProcess& server, ClientOptions options = RemoteClientOptions()) {
    established_ = ConnectClient(server.address(), options);
    ASSERT_NE(established_, nullptr);
    resident_ = CompactTensor(kU8, {65536}, PatternBytes(65536, 5));
    resident_name_ = TestTensorName("resident");
    absl::StatusOr<TensorInfo> put = established_->Put(resident_name_, resident_.dl());
    ASSERT_TRUE(put.ok()) << put.status();
    ExpectFetches(*established_, resident_name_, resident_);
  }
  void ExpectEstablishedStillServed() {
    for (int i = 0; i < 3; ++i) ExpectFetches(*established_, resident_name_, resident_);
  }

  std::unique_ptr<Client> established_;
  HostTensor resident_;
  std::string resident_name_;
};

TEST_P(ConnectionFloodTest, ListenerKeepsAcceptingAfterTheFdLimitIsReached) {
  // A cap above the fd limit, so accept() itself runs out of fds: the case
  // that stopped gRPC's own listener for good.
  std::unique_ptr<ServerProcess> server = StartLimited(GetParam(), {"--max-connections=100000"});
  ASSERT_NE(server, nullptr);
  ConnectEstablished(*server);
  const size_t baseline = ServerFds(*server);
  std::vector<ScopedFd> flood = Flood(server->address(), 3 * kOpenFileLimit, "");
  ASSERT_EQ(flood.size(), 3 * kOpenFileLimit);
  // Connections beyond the fds left are closed at once.
  EXPECT_GE(WaitForClosed(flood, 2 * kOpenFileLimit, absl::Seconds(5)), 2 * kOpenFileLimit);
  ExpectEstablishedStillServed();
  EndFlood(flood, *server, baseline);
  ExpectNewClientWithinOneSecond(server->address(), RemoteClientOptions(), "after-fd-flood");
  ExpectEstablishedStillServed();

  // Logged once for the episode, then once with its count when it ended.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (server->Stderr().find("event=fd_exhausted_ended") == std::string::npos &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  const std::string log = server->Stderr();
  EXPECT_EQ(CountLines(log, "event=fd_exhausted "), 1u) << log;
  EXPECT_EQ(CountLines(log, "event=fd_exhausted_ended failures="), 1u) << log;
  EXPECT_TRUE(absl::StrContains(log, "RLIMIT_NOFILE = 128")) << log;
  EXPECT_FALSE(absl::StrContains(log, "Failed accept4")) << log;
}

TEST_P(ConnectionFloodTest, ConnectionsBeyondTheCapAreClosedAtOnce) {
  std::unique_ptr<ServerProcess> server = StartLimited(GetParam(), {});
  ASSERT_NE(server, nullptr);
  // Derived from the limit: half of it.
  ASSERT_TRUE(absl::StrContains(server->Stderr(), "max_connections=64")) << server->Stderr();
  ConnectEstablished(*server);
  const size_t baseline = ServerFds(*server);
  std::vector<ScopedFd> flood = Flood(server->address(), 100, "");
  ASSERT_EQ(flood.size(), 100u);
  // The established client holds one place; 63 of the flood get the rest.
  // The handshake timeout (5 s) has not closed any of those yet.
  EXPECT_EQ(WaitForClosed(flood, 37, absl::Seconds(3)), 37u);
  ExpectEstablishedStillServed();
  EXPECT_EQ(CountClosed(flood), 37u);
  EndFlood(flood, *server, baseline);
  ExpectNewClientWithinOneSecond(server->address(), RemoteClientOptions(), "after-cap-flood");
  EXPECT_EQ(CountLines(server->Stderr(), "event=connection_cap_reached "), 1u) << server->Stderr();
}

TEST_P(ConnectionFloodTest, HalfSentHttp2PrefacesAreClosedAfterTheHandshakeTimeout) {
  std::unique_ptr<ServerProcess> server = StartLimited(GetParam(), {"--handshake-timeout=1s"});
  ASSERT_NE(server, nullptr);
  ConnectEstablished(*server);
  const size_t baseline = ServerFds(*server);
  // The first half of "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", and nothing more.
  std::vector<ScopedFd> flood = Flood(server->address(), 100, "PRI * HTTP/2.0\r\n");
  ASSERT_EQ(flood.size(), 100u);
  ExpectEstablishedStillServed();
  EXPECT_EQ(WaitForClosed(flood, 100, absl::Seconds(10)), 100u);
  ExpectEstablishedStillServed();
  EndFlood(flood, *server, baseline);
  ExpectNewClientWithinOneSecond(server->address(), RemoteClientOptions(), "after-preface-flood");
}

// A call made just as an idle connection is closed must be answered. The
// server's close (--connection-idle-timeout, gRPC's max_connection_idle) is
// abrupt: a call crossing it failed UNAVAILABLE ("enter idle", "Broken
// pipe", "GOAWAY received"), gRPC's transparent retries or not. So the
// client closes an idle connection first (ClientOptions::
// connection_idle_timeout, under half the server's: gRPC closes between
// one and two idle timeouts after the last call), and its next call simply
// connects again.
TEST_P(ConnectionFloodTest, CallsAfterIdlePausesAreAnswered) {
  constexpr absl::Duration kServerIdle = absl::Milliseconds(2500);
  std::unique_ptr<ServerProcess> server = StartLimited(
      GetParam(), {absl::StrCat("--connection-idle-timeout=", absl::FormatDuration(kServerIdle))});
  ASSERT_NE(server, nullptr);
  ClientOptions options = RemoteClientOptions();
  options.connection_idle_timeout = absl::Seconds(1);  // gRPC's minimum
  std::unique_ptr<Client> client = ConnectClient(server->address(), options);
  ASSERT_NE(client, nullptr);
  const std::string name = TestTensorName("idle-pauses");
  HostTensor tensor = CompactTensor(kU8, {4096}, PatternBytes(4096, 9));
  absl::StatusOr<TensorInfo> put = client->Put(name, tensor.dl());
  ASSERT_TRUE(put.ok()) << put.status();
  // The connection goes once idle, closed by the client: within two of its
  // idle timeouts, before the server's earliest close.
  const size_t connected = ServerFds(*server);
  const absl::Time closed_by = absl::Now() + kServerIdle - absl::Milliseconds(200);
  while (ServerFds(*server) >= connected && absl::Now() < closed_by) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_LT(ServerFds(*server), connected) << "the client did not close its idle connection first";
  // Pauses from just under the server's idle timeout to past it: without
  // the client's own close, the server's crossed one of these calls.
  for (int i = 0; i < 4; ++i) {
    absl::SleepFor(kServerIdle - absl::Milliseconds(150) + absl::Milliseconds(200 * i));
    absl::StatusOr<TensorInfo> stat = client->Stat(name);
    ASSERT_TRUE(stat.ok()) << "call " << i << ": " << stat.status();
    EXPECT_EQ(stat->version, put->version);
    ExpectFetches(*client, name, tensor);
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, ConnectionFloodTest, kBothTransports, TransportParamName);

TEST(ConnectionFloodTlsTest, TlsHandshakesThatNeverFinishAreClosed) {
  absl::StatusOr<std::unique_ptr<TestPki>> pki = TestPki::Create();
  if (!pki.ok()) GTEST_SKIP() << "no test certificates: " << pki.status();
  std::unique_ptr<ServerProcess> server =
      StartLimited(Transport::kTcp, {"--handshake-timeout=1s",
                                     absl::StrCat("--tls-cert=", (*pki)->Path("server.pem")),
                                     absl::StrCat("--tls-key=", (*pki)->Path("server.key"))});
  ASSERT_NE(server, nullptr);
  ClientOptions tls = RemoteClientOptions();
  tls.tls_root_ca = (*pki)->Path("ca.pem");
  std::unique_ptr<Client> established = ConnectClient(server->address(), tls);
  ASSERT_NE(established, nullptr);
  HostTensor resident = CompactTensor(kU8, {65536}, PatternBytes(65536, 6));
  ASSERT_TRUE(established->Put("tls/resident", resident.dl()).ok());
  const size_t baseline = ServerFds(*server);

  // A TLS record header announcing a ClientHello, then a few of its bytes.
  const std::string partial_hello("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11);
  std::vector<ScopedFd> flood = Flood(server->address(), 100, partial_hello);
  ASSERT_EQ(flood.size(), 100u);
  ExpectFetches(*established, "tls/resident", resident);
  EXPECT_EQ(WaitForClosed(flood, 100, absl::Seconds(10)), 100u);
  ExpectFetches(*established, "tls/resident", resident);
  EndFlood(flood, *server, baseline);
  ExpectNewClientWithinOneSecond(server->address(), tls, "after-tls-flood");
}

class HandoffFloodTest : public ::testing::Test {
 protected:
  std::unique_ptr<ServerProcess> Start(std::vector<std::string> flags) {
    flags.push_back("--handoff-socket=" + socket_dir_.File("handoff.sock"));
    return StartLimited(Transport::kTcp, std::move(flags));
  }
  ClientOptions Local() const {
    ClientOptions options;
    options.path = TransferPath::kLocal;
    options.handoff_socket = socket_dir_.File("handoff.sock");
    return options;
  }
  std::string SocketAddress() const { return "unix:" + socket_dir_.File("handoff.sock"); }

  TempDir socket_dir_;
};

TEST_F(HandoffFloodTest, ConnectionsBeyondTheCapAreClosedAtOnce) {
  std::unique_ptr<ServerProcess> server = Start({});
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Client> established = ConnectClient(server->address(), Local());
  ASSERT_NE(established, nullptr);
  HostTensor resident = CompactTensor(kU8, {65536}, PatternBytes(65536, 8));
  ASSERT_TRUE(established->Put("handoff/resident", resident.dl()).ok());
  ExpectFetches(*established, "handoff/resident", resident);
  const size_t baseline = ServerFds(*server);

  // Derived cap: an eighth of 128, so 16 (the established client holds one).
  std::vector<ScopedFd> flood = Flood(SocketAddress(), 100, "", /*seqpacket=*/true);
  ASSERT_EQ(flood.size(), 100u);
  EXPECT_EQ(WaitForClosed(flood, 85, absl::Seconds(3)), 85u);
  ExpectFetches(*established, "handoff/resident", resident);
  EndFlood(flood, *server, baseline);
  ExpectNewClientWithinOneSecond(server->address(), Local(), "after-handoff-cap-flood");
}

TEST_F(HandoffFloodTest, ListenerKeepsAcceptingAfterTheFdLimitIsReached) {
  std::unique_ptr<ServerProcess> server = Start({"--max-handoff-connections=100000"});
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Client> established = ConnectClient(server->address(), Local());
  ASSERT_NE(established, nullptr);
  HostTensor resident = CompactTensor(kU8, {65536}, PatternBytes(65536, 9));
  ASSERT_TRUE(established->Put("handoff/resident", resident.dl()).ok());
  ExpectFetches(*established, "handoff/resident", resident);
  const size_t baseline = ServerFds(*server);

  std::vector<ScopedFd> flood = Flood(SocketAddress(), 3 * kOpenFileLimit, "", true);
  ASSERT_EQ(flood.size(), 3 * kOpenFileLimit);
  EXPECT_GE(WaitForClosed(flood, 2 * kOpenFileLimit, absl::Seconds(5)), 2 * kOpenFileLimit);
  ExpectFetches(*established, "handoff/resident", resident);
  EndFlood(flood, *server, baseline);
  ExpectNewClientWithinOneSecond(server->address(), Local(), "after-handoff-fd-flood");
  EXPECT_EQ(CountLines(server->Stderr(), "event=fd_exhausted "), 1u) << server->Stderr();
}

TEST(FdExhaustionTest, PutsAndCreatesAtTheFdLimitNameTheLimit) {
  TempDir socket_dir;
  const std::string socket = socket_dir.File("handoff.sock");
#if defined(__SANITIZE_ADDRESS__)
  // CI's sanitizer build is ASan+UBSan: UBSan checks a vptr it has not seen
  // before by writing the memory into a pipe, and with no fd left that pipe
  // fails and it reports valid objects (gRPC's CallOpSet, our handoff
  // messages) as "invalid vptr", which no suppression can match. This test
  // runs the server out of fds on purpose, so it runs in the other builds.
  GTEST_SKIP() << "UBSan's vptr check needs a free fd (pipe); this test exhausts them";
#endif
  // Versions above the arena threshold hold a memfd each, so enough of
  // them still reach the fd limit (small ones share arenas: arena_test.cc).
  std::unique_ptr<ServerProcess> server = StartLimited(
      Transport::kTcp, {"--handoff-socket=" + socket, "--arena-max-tensor-bytes=4KiB"});
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Client> remote = ConnectClient(server->address(), RemoteClientOptions());
  ClientOptions local_options;
  local_options.path = TransferPath::kLocal;
  local_options.handoff_socket = socket;
  std::unique_ptr<Client> local = ConnectClient(server->address(), local_options);
  ASSERT_NE(remote, nullptr);
  ASSERT_NE(local, nullptr);
  HostTensor tensor = CompactTensor(kU8, {8192}, PatternBytes(8192, 10));
  // Connects the local client's handoff socket while fds remain.
  ASSERT_TRUE(remote->Put("many/first", tensor.dl()).ok());
  ExpectFetches(*local, "many/first", tensor);
  const std::vector<int64_t> shape = {8192};

  // Every version is one memfd: distinct tensors use up the fds tensors
  // may have.
  absl::Status failed;
  int stored = 0;
  for (; stored < static_cast<int>(kOpenFileLimit); ++stored) {
    absl::StatusOr<TensorInfo> put = remote->Put(absl::StrCat("many/t", stored), tensor.dl());
    if (!put.ok()) {
      failed = put.status();
      break;
    }
  }
  ASSERT_FALSE(failed.ok()) << "no put failed at " << stored << " tensors";
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted) << failed;
  EXPECT_TRUE(absl::StrContains(failed.message(), "RLIMIT_NOFILE = 128")) << failed;
  EXPECT_FALSE(absl::StrContains(failed.message(), "Too many open files")) << failed;

  absl::StatusOr<std::unique_ptr<TensorWriter>> writer = local->Create("many/local", kU8, shape);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kResourceExhausted) << writer.status();
  EXPECT_TRUE(absl::StrContains(writer.status().message(), "RLIMIT_NOFILE = 128"))
      << writer.status();
  EXPECT_FALSE(remote->Put("many/again", tensor.dl()).ok());

  // The fds above the tensors' ceiling are kept for connections: new
  // clients of both kinds still connect and are served.
  EXPECT_TRUE(absl::StrContains(failed.message(), "kept for connections")) << failed;
  for (int i = 0; i < 4; ++i) {
    std::unique_ptr<Client> late = ConnectClient(server->address(), RemoteClientOptions());
    ASSERT_NE(late, nullptr);
    EXPECT_TRUE(late->Stat("many/first").ok()) << i;
    std::unique_ptr<Client> late_local = ConnectClient(server->address(), local_options);
    ASSERT_NE(late_local, nullptr);
    ExpectFetches(*late_local, "many/t0", tensor);
  }

  // One log line for the whole episode.
  EXPECT_EQ(CountLines(server->Stderr(), "event=fd_exhausted "), 1u) << server->Stderr();
  // Nothing stored was lost, and deleting frees fds for new puts.
  for (int i = 0; i < stored; i += 7) ExpectFetches(*remote, absl::StrCat("many/t", i), tensor);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(remote->Delete(absl::StrCat("many/t", i)).ok());
  EXPECT_TRUE(remote->Put("many/after", tensor.dl()).ok());
}

}  // namespace
}  // namespace tensord::testing
