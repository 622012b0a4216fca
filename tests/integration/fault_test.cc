// Faults against a real tensord: clients killed mid-stream, SIGTERM with
// streams in flight, and garbage on the gRPC port and the handoff socket.
// A client to kill is this test binary run again in a child process
// (FaultTestChild.DISABLED_HoldStreamOpen), so the child starts gRPC fresh
// instead of inheriting a forked copy of ours.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service/common/crc32c.h"
#include "service/common/mutex.h"
#include "service/common/scoped_fd.h"
#include "service/common/unix_socket.h"
#include "tensord/client.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/raw_stub.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_support.h"

extern char** environ;

namespace tensord::testing {
namespace {

// "MODE|ADDRESS|NAME|READY_FD" for the child; MODE is put or fetch.
constexpr char kChildVariable[] = "TENSORD_FAULT_CHILD";
constexpr uint64_t kPutBytes = 8 << 20;

// Run only as a child (see ChildClient): opens a stream, reports on the
// ready fd, and waits to be killed.
TEST(FaultTestChild, DISABLED_HoldStreamOpen) {
  const char* spec = std::getenv(kChildVariable);
  if (spec == nullptr) GTEST_SKIP() << "only runs as a child of a fault test";
  std::vector<std::string> parts = absl::StrSplit(spec, '|');
  ASSERT_EQ(parts.size(), 4u);
  int ready_fd = -1;
  ASSERT_TRUE(absl::SimpleAtoi(parts[3], &ready_fd));
  const std::string& mode = parts[0];
  std::unique_ptr<RawStub> stub = NewRawStub(parts[1], /*small_window=*/mode == "fetch");
  grpc::ClientContext context;
  v1::PutResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::PutRequest>> writer;
  std::unique_ptr<grpc::ClientReader<v1::FetchResponse>> reader;
  if (mode == "put") {
    writer = stub->Put(&context, &response);
    ASSERT_TRUE(writer->Write(HeaderMessage(parts[2], RawDataType(1, 8), {kPutBytes}, kPutBytes)));
    const std::string chunk(1 << 20, 'x');
    ASSERT_TRUE(writer->Write(ChunkMessage(0, chunk)));
    ASSERT_TRUE(writer->Write(ChunkMessage(chunk.size(), chunk)));
  } else {
    v1::FetchRequest request;
    request.set_name(parts[2]);
    request.set_max_chunk_bytes(64 << 10);
    reader = stub->Fetch(&context, request);
    v1::FetchResponse message;
    ASSERT_TRUE(reader->Read(&message) && message.has_header());
    ASSERT_TRUE(reader->Read(&message) && message.has_chunk());
  }
  char ok = 'k';
  ASSERT_EQ(::write(ready_fd, &ok, 1), 1);
  // Killed by the parent; bounded in case it never does.
  for (int i = 0; i < 600; ++i) ::sleep(1);
}

// This binary run as FaultTestChild in a child process; SIGKILLed and
// reaped when it goes away.
class ChildClient {
 public:
  static absl::StatusOr<std::unique_ptr<ChildClient>> Start(const std::string& mode,
                                                            const std::string& address,
                                                            const std::string& name) {
    char self[4096];
    const ssize_t length = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (length <= 0) return absl::InternalError("readlink /proc/self/exe failed");
    self[length] = '\0';
    int fds[2];
    if (::pipe(fds) != 0) return absl::InternalError("pipe failed");
    ScopedFd read_end(fds[0]), write_end(fds[1]);
    ::fcntl(read_end.get(), F_SETFD, FD_CLOEXEC);
    // Everything the child needs is built before fork().
    std::vector<std::string> arguments = {self, "--gtest_also_run_disabled_tests",
                                          "--gtest_filter=FaultTestChild.DISABLED_HoldStreamOpen"};
    std::vector<std::string> environment = {
        absl::StrCat(kChildVariable, "=", mode, "|", address, "|", name, "|", write_end.get())};
    for (char** variable = environ; *variable != nullptr; ++variable) {
      environment.emplace_back(*variable);
    }
    std::vector<char*> argv, envp;
    for (std::string& argument : arguments) argv.push_back(argument.data());
    for (std::string& variable : environment) envp.push_back(variable.data());
    argv.push_back(nullptr);
    envp.push_back(nullptr);
    const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) return absl::InternalError("fork failed");
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      if (null_fd >= 0) ::dup2(null_fd, STDOUT_FILENO);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    if (null_fd >= 0) ::close(null_fd);
    auto child = std::unique_ptr<ChildClient>(new ChildClient(pid));
    write_end.Reset();
    pollfd ready{.fd = read_end.get(), .events = POLLIN, .revents = 0};
    char byte = 0;
    if (::poll(&ready, 1, 30'000) != 1 || ::read(read_end.get(), &byte, 1) != 1) {
      return absl::DeadlineExceededError(absl::StrCat("the ", mode, " child never became ready"));
    }
    return child;
  }

  ~ChildClient() { Kill(); }

  // SIGKILL, then reap.
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  explicit ChildClient(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

// Polls `condition` every 20 ms for up to `timeout`.
template <typename Condition>
bool WaitFor(Condition condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

class FaultTest : public ::testing::Test {
 protected:
  void TearDown() override {
    client_.reset();
    server_.reset();
    if (!scratch_dir_.empty()) std::filesystem::remove_all(scratch_dir_);
  }

  const std::string& ScratchDir() {
    if (scratch_dir_.empty()) {
      char pattern[] = "/tmp/tensord-fault-XXXXXX";
      EXPECT_NE(::mkdtemp(pattern), nullptr);
      scratch_dir_ = pattern;
    }
    return scratch_dir_;
  }

  void Start(std::vector<std::string> flags = {}) {
    client_.reset();
    ServerProcessOptions options;
    options.flags = std::move(flags);
    absl::StatusOr<std::unique_ptr<ServerProcess>> started = ServerProcess::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
    client_ = ConnectClient(server_->address(), RemoteClientOptions());
    ASSERT_NE(client_, nullptr);
  }

  uint64_t HostBytesUsed() {
    absl::StatusOr<ListResult> list = client_->List("", 1);
    return list.ok() ? list->total_bytes : ~uint64_t{0};
  }

  uint64_t OpenLeases(const std::string& name) {
    absl::StatusOr<TensorInfo> info = client_->Stat(name);
    return info.ok() ? info->open_leases : ~uint64_t{0};
  }

  std::string scratch_dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(FaultTest, ClientKilledMidPutPublishesNothingAndFreesItsBytes) {
  Start();
  const uint64_t before = HostBytesUsed();
  absl::StatusOr<std::unique_ptr<ChildClient>> child =
      ChildClient::Start("put", server_->address(), "killed/put");
  ASSERT_TRUE(child.ok()) << child.status();
  // The put reserved its bytes but published nothing yet. The child's writes
  // returned once queued, so the server may still be reading the header.
  EXPECT_TRUE(WaitFor([&] { return HostBytesUsed() == before + kPutBytes; }, absl::Seconds(10)))
      << "host bytes used " << HostBytesUsed() << ", expected " << before + kPutBytes;
  EXPECT_EQ(client_->Stat("killed/put").status().code(), absl::StatusCode::kNotFound);
  (*child)->Kill();
  EXPECT_TRUE(WaitFor([&] { return HostBytesUsed() == before; }, absl::Seconds(10)))
      << "host bytes used stayed at " << HostBytesUsed() << ", not " << before;
  EXPECT_EQ(client_->Stat("killed/put").status().code(), absl::StatusCode::kNotFound);
  ExpectServing(*client_);
}

TEST_F(FaultTest, ClientKilledMidFetchReleasesItsLease) {
  Start({"--chunk-bytes=64KiB"});
  HostTensor big = CompactTensor(kU8, {16 << 20}, PatternBytes(16 << 20, 9));
  ASSERT_TRUE(client_->Put("fetched/big", big.dl()).ok());
  absl::StatusOr<std::unique_ptr<ChildClient>> child =
      ChildClient::Start("fetch", server_->address(), "fetched/big");
  ASSERT_TRUE(child.ok()) << child.status();
  // The child reads no further, so flow control holds the stream open.
  EXPECT_EQ(OpenLeases("fetched/big"), 1u);
  (*child)->Kill();
  EXPECT_TRUE(WaitFor([&] { return OpenLeases("fetched/big") == 0; }, absl::Seconds(10)))
      << "open leases stayed at " << OpenLeases("fetched/big");
  // Deleting it now frees its bytes: nothing else holds them.
  ASSERT_TRUE(client_->Delete("fetched/big").ok());
  EXPECT_TRUE(WaitFor([&] { return HostBytesUsed() == 0; }, absl::Seconds(5)));
}

// A server that stops reading (here: stopped by SIGSTOP) holds a cancelled
// put's chunks in the client's socket, and gRPC gives them back, letting the
// put return, only when the connection closes. Keepalive closes it: the put
// returns within keepalive_time + keepalive_timeout of its deadline, not
// when the server comes back. A fetch from it likewise.
TEST_F(FaultTest, CallsToAServerThatStoppedReadingReturnSoonAfterTheirDeadline) {
  Start();
  ClientOptions options = RemoteClientOptions();
  options.timeout = absl::Milliseconds(300);
  options.keepalive_time = absl::Seconds(1);
  options.keepalive_timeout = absl::Seconds(1);
  std::unique_ptr<Client> hurried = ConnectClient(server_->address(), options);
  ASSERT_NE(hurried, nullptr);
  HostTensor small = CompactTensor(kU8, {4096}, PatternBytes(4096, 3));
  // Connected first (a loaded or sanitized run may miss the first deadlines).
  ASSERT_TRUE(
      WaitFor([&] { return hurried->Put("stopped/warm", small.dl()).ok(); }, absl::Seconds(30)));
  constexpr int64_t kBytes = int64_t{64} << 20;  // far more than loopback buffers hold
  HostTensor big = CompactTensor(kU8, {kBytes}, PatternBytes(kBytes, 4));

  ASSERT_EQ(::kill(server_->pid(), SIGSTOP), 0);
  struct Resume {
    pid_t pid;
    ~Resume() { ::kill(pid, SIGCONT); }
  } resume{server_->pid()};
  // Runs `call` on its own thread; false when it still ran after 20 s (the
  // 300 ms deadline + 1 s to the ping + 1 s for its answer, with room for a
  // loaded machine), and then the server is resumed so that the call ends.
  auto returns_in_time = [&](const std::function<absl::Status()>& call, absl::Status& status) {
    std::atomic<bool> returned{false};
    std::thread caller([&] {
      status = call();
      returned = true;
    });
    const bool in_time = WaitFor([&] { return returned.load(); }, absl::Seconds(20));
    if (!in_time) ::kill(server_->pid(), SIGCONT);
    caller.join();
    return in_time;
  };
  for (uint32_t streams : {1u, 2u}) {
    PutOptions put_options;
    put_options.streams = streams;
    absl::Status status;
    const bool in_time = returns_in_time(
        [&] { return hurried->Put("stopped/big", big.dl(), put_options).status(); }, status);
    EXPECT_TRUE(in_time) << "a put in " << streams << " streams waited for the stopped server";
    EXPECT_TRUE(status.code() == absl::StatusCode::kDeadlineExceeded ||
                status.code() == absl::StatusCode::kUnavailable)
        << status;
    if (!in_time) break;
  }
  absl::Status fetch_status;
  EXPECT_TRUE(
      returns_in_time([&] { return hurried->Fetch("stopped/warm").status(); }, fetch_status));
  EXPECT_FALSE(fetch_status.ok());

  ASSERT_EQ(::kill(server_->pid(), SIGCONT), 0);
  // The server lost nothing and publishes nothing half-sent.
  ExpectServing(*client_);
  absl::StatusOr<TensorInfo> stored = client_->Stat("stopped/big");
  if (stored.ok()) {
    EXPECT_EQ(stored->crc32c, Crc32c(big.storage.data(), big.storage.size()));
  } else {
    EXPECT_EQ(stored.status().code(), absl::StatusCode::kNotFound) << stored.status();
  }
  absl::StatusOr<Tensor> warm = client_->Fetch("stopped/warm");
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_TRUE(BytesEqual(warm->dl_tensor().data, warm->data_bytes(), small.storage));
}

TEST(KeepaliveOptionsTest, NonPositiveOrInfiniteTimeoutsAreRefusedByName) {
  ClientOptions options = RemoteClientOptions();
  options.server = "127.0.0.1:1";  // never reached: the options are checked first
  options.keepalive_time = absl::ZeroDuration();
  EXPECT_TRUE(StatusIs(Client::Connect(options).status(), absl::StatusCode::kInvalidArgument,
                       "keepalive_time 0 must be positive"));
  options.keepalive_time = absl::Seconds(30);
  options.keepalive_timeout = -absl::Seconds(1);
  EXPECT_TRUE(StatusIs(Client::Connect(options).status(), absl::StatusCode::kInvalidArgument,
                       "keepalive_timeout -1s must be positive and finite"));
  options.keepalive_timeout = absl::InfiniteDuration();
  EXPECT_TRUE(StatusIs(Client::Connect(options).status(), absl::StatusCode::kInvalidArgument,
                       "keepalive_timeout inf"));
  // No pings at all is a choice.
  options.keepalive_time = absl::InfiniteDuration();
  options.keepalive_timeout = absl::Seconds(20);
  EXPECT_TRUE(Client::Connect(options).ok());
}

TEST(ClientOptionsTest, AnIdleTimeoutBelowGrpcsMinimumIsRefusedByName) {
  ClientOptions options = RemoteClientOptions();
  options.server = "127.0.0.1:1";  // never reached: the options are checked first
  options.connection_idle_timeout = absl::Milliseconds(999);
  EXPECT_TRUE(StatusIs(Client::Connect(options).status(), absl::StatusCode::kInvalidArgument,
                       "connection_idle_timeout 999ms is below gRPC's minimum of 1s"));
  options.connection_idle_timeout = absl::Seconds(1);
  EXPECT_TRUE(Client::Connect(options).ok());
  options.connection_idle_timeout = absl::InfiniteDuration();  // accepted: never close
  EXPECT_TRUE(Client::Connect(options).ok());
}

// Bytes of put `index` of writer `writer`: a size and pattern both derive
// from the name, so any stored copy can be checked without bookkeeping.
std::vector<uint8_t> InFlightBytes(int writer, int index) {
  return PatternBytes((256 << 10) + (index % 4) * (512 << 10), writer * 100'000 + index);
}

TEST_F(FaultTest, SigtermWithStreamsInFlightFinishesOrFailsCleanlyAndPublishesNothingHalf) {
  const std::string snapshot_dir = ScratchDir() + "/snapshots";
  Start({"--snapshot-dir=" + snapshot_dir, "--chunk-bytes=64KiB"});
  HostTensor big = CompactTensor(kU8, {4 << 20}, PatternBytes(4 << 20, 31));
  ASSERT_TRUE(client_->Put("reference", big.dl()).ok());

  constexpr int kWriters = 4, kReaders = 2, kMaxOps = 400;
  Mutex mutex;
  std::set<std::pair<int, int>> acknowledged;
  std::vector<std::string> unexpected;
  std::atomic<int> mismatches{0}, completed_fetches{0};
  std::atomic<bool> stop{false};
  auto record_failure = [&](const absl::Status& status) {
    // Once the server stops, calls fail as unavailable or cancelled; any
    // other code (INTERNAL, DATA_LOSS...) would be a broken stream.
    if (status.code() != absl::StatusCode::kUnavailable &&
        status.code() != absl::StatusCode::kCancelled) {
      MutexLock lock(&mutex);
      unexpected.push_back(status.ToString());
    }
  };
  std::vector<std::thread> threads;
  const std::string address = server_->address();
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::unique_ptr<Client> client = ConnectClient(address, RemoteClientOptions());
      for (int i = 0; i < kMaxOps && client != nullptr && !stop; ++i) {
        std::vector<uint8_t> bytes = InFlightBytes(w, i);
        HostTensor tensor = CompactTensor(kU8, {static_cast<int64_t>(bytes.size())}, bytes);
        absl::StatusOr<TensorInfo> put =
            client->Put(absl::StrCat("inflight/", w, "/", i), tensor.dl());
        if (!put.ok()) {
          record_failure(put.status());
          return;
        }
        MutexLock lock(&mutex);
        acknowledged.emplace(w, i);
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&] {
      std::unique_ptr<Client> client = ConnectClient(address, RemoteClientOptions());
      for (int i = 0; i < kMaxOps && client != nullptr && !stop; ++i) {
        absl::StatusOr<Tensor> fetched = client->Fetch("reference");
        if (!fetched.ok()) {
          record_failure(fetched.status());
          return;
        }
        std::vector<uint8_t> bytes = TensorBytes(*fetched);
        if (bytes != big.storage) ++mismatches;
        ++completed_fetches;
      }
    });
  }
  // Signal once streams are flowing (bounded wait).
  WaitFor(
      [&] {
        MutexLock lock(&mutex);
        return acknowledged.size() >= 8 && completed_fetches >= 2;
      },
      absl::Seconds(20));
  absl::StatusOr<int> stopped = server_->Stop(SIGTERM, absl::Seconds(30));
  stop = true;
  for (std::thread& thread : threads) thread.join();
  ASSERT_TRUE(stopped.ok() && WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0)
      << server_->StderrTail();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_TRUE(unexpected.empty()) << unexpected.front();
  std::printf("in flight at SIGTERM: %zu puts acknowledged, %d fetches verified\n",
              acknowledged.size(), completed_fetches.load());

  // The shutdown snapshot holds every acknowledged put, and whatever else it
  // holds is whole.
  Start({"--snapshot-dir=" + snapshot_dir});
  absl::StatusOr<std::vector<TensorInfo>> stored = client_->ListAll("inflight/");
  ASSERT_TRUE(stored.ok()) << stored.status();
  std::set<std::pair<int, int>> present;
  for (const TensorInfo& info : *stored) {
    std::vector<std::string> parts = absl::StrSplit(info.name, '/');
    int w = 0, i = 0;
    ASSERT_TRUE(parts.size() == 3 && absl::SimpleAtoi(parts[1], &w) &&
                absl::SimpleAtoi(parts[2], &i))
        << info.name;
    present.emplace(w, i);
    absl::StatusOr<Tensor> fetched = client_->Fetch(info.name);
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    EXPECT_EQ(TensorBytes(*fetched), InFlightBytes(w, i)) << info.name;
  }
  for (const auto& put : acknowledged) {
    EXPECT_TRUE(present.count(put))
        << "acknowledged put inflight/" << put.first << "/" << put.second << " was lost";
  }
}

// Sends `bytes` on a fresh TCP connection to `port`, half-closes, and reads
// whatever comes back until the server closes (bounded by a 5 s timeout).
void SendRawTcp(int port, const std::string& bytes) {
  ScopedFd socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(socket.valid());
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(socket.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  timeval timeout{.tv_sec = 5, .tv_usec = 0};
  ::setsockopt(socket.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(socket.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  // The server may close mid-way; a failed send is fine.
  (void)::send(socket.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
  ::shutdown(socket.get(), SHUT_WR);
  char buffer[4096];
  for (int i = 0; i < 1000 && ::recv(socket.get(), buffer, sizeof(buffer), 0) > 0; ++i) {
  }
}

std::string RandomBytes(size_t size, uint64_t seed) {
  std::vector<uint8_t> pattern = PatternBytes(size, seed);
  return std::string(pattern.begin(), pattern.end());
}

TEST_F(FaultTest, GarbageOnTheGrpcPortLeavesTheServerServing) {
  Start();
  const std::string& address = server_->address();
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) << address;
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  // A connection that sends half a preface and then says nothing more.
  ScopedFd idle(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in idle_address{};
  idle_address.sin_family = AF_INET;
  idle_address.sin_port = htons(static_cast<uint16_t>(port));
  idle_address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(idle.get(), reinterpret_cast<sockaddr*>(&idle_address), sizeof(idle_address)),
            0);
  ASSERT_GT(::send(idle.get(), preface.data(), 10, MSG_NOSIGNAL), 0);

  SendRawTcp(port, RandomBytes(64 << 10, 1));
  SendRawTcp(port, preface.substr(0, 20));                // truncated preface
  SendRawTcp(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");  // not HTTP/2 at all
  // A valid preface, then a DATA frame header claiming 16 MiB on stream 1,
  // then garbage.
  SendRawTcp(port, preface + std::string("\xff\xff\xff\x00\x00\x00\x00\x00\x01", 9) +
                       RandomBytes(1000, 2));
  // A valid preface, then random frames.
  SendRawTcp(port, preface + RandomBytes(8192, 3));
  ASSERT_TRUE(server_->Alive()) << server_->StderrTail();
  ExpectServing(*client_);
}

TEST_F(FaultTest, GarbageOnTheHandoffSocketLeavesTheServerServing) {
  const std::string socket_path = ScratchDir() + "/handoff.sock";
  Start({"--handoff-socket=" + socket_path});
  auto send_packet = [&](const std::string& bytes) {
    absl::StatusOr<ScopedFd> socket = ConnectSeqpacket(socket_path);
    ASSERT_TRUE(socket.ok()) << socket.status();
    // An oversized packet may be refused by the kernel (EMSGSIZE); either way
    // the server must survive.
    (void)::send(socket->get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    timeval timeout{.tv_sec = 5, .tv_usec = 0};
    ::setsockopt(socket->get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    char reply[kMaxPacketBytes];
    (void)::recv(socket->get(), reply, sizeof(reply), 0);
  };
  send_packet(RandomBytes(1000, 4));
  send_packet(RandomBytes(kMaxPacketBytes + 1, 5));
  send_packet(RandomBytes(200 << 10, 6));
  send_packet(std::string());
  send_packet(std::string("\x0a\xff\xff\xff\xff\x0f", 6));  // a field claiming 4 GiB
  ASSERT_TRUE(server_->Alive()) << server_->StderrTail();

  ClientOptions local_options;
  local_options.path = TransferPath::kLocal;
  local_options.handoff_socket = socket_path;
  std::unique_ptr<Client> local = ConnectClient(server_->address(), local_options);
  ASSERT_NE(local, nullptr);
  ExpectServing(*local);
  ExpectServing(*client_);
}

}  // namespace
}  // namespace tensord::testing
