// The command lines of tensord, tensorctl and tensord-bench as users type
// them: --help and --version exit 0 and say what they should, unknown flags
// and commands are refused with the nearest known one named; TENSORD_*
// variables give way to flags on the command line; put-many and get-many
// against a real server.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "service/common/unix_socket.h"
#include "tensord/client.h"
#include "tensord/v1/handoff.pb.h"
#include "tests/integration/client_test_support.h"
#include "tests/integration/server_process.h"
#include "tests/integration/test_pki.h"
#include "tests/integration/test_support.h"

namespace tensord {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;

struct ProgramRun {
  int exit_code = -1;  // -1: killed or did not exit in time
  std::string out;
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// Runs `program` with `arguments` (no shell), stdout and stderr to files;
// killed after 20 s so a hang fails the test instead of stalling it. Its
// environment is this process's without TENSORD_* variables, plus
// `environment` ("NAME=VALUE" entries).
ProgramRun RunProgram(const std::string& program, const std::vector<std::string>& arguments,
                      const std::vector<std::string>& environment = {}) {
  const std::string base = absl::StrCat(::testing::TempDir(), "command_line_", getpid());
  const std::string out_path = base + ".out", err_path = base + ".err";
  std::vector<std::string> argv_storage = {program};
  argv_storage.insert(argv_storage.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& argument : argv_storage) argv.push_back(argument.data());
  argv.push_back(nullptr);
  // Built before fork(): the child may only make async-signal-safe calls.
  std::vector<std::string> environment_storage = environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (!std::string_view(*entry).starts_with("TENSORD_")) environment_storage.emplace_back(*entry);
  }
  std::vector<char*> envp;
  for (std::string& entry : environment_storage) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(127);
    execve(program.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  ProgramRun run;
  if (pid < 0) return run;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      status = -1;
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (status != -1 && WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  run.out = ReadFile(out_path);
  run.err = ReadFile(err_path);
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  return run;
}

const std::string kTensord = TENSORD_BINARY_PATH;
const std::string kTensorctl = TENSORCTL_BINARY_PATH;
const std::string kTensordBench = TENSORD_BENCH_BINARY_PATH;

// What every executable the project ships or documents does, alike: --help
// prints usage on standard output with exit 0 (even beside a mistake), and
// an unknown flag is refused with exit 2, named, with the closest known one.
TEST(EveryBinaryCommandLineTest, HelpExitsZeroAndAnUnknownFlagExitsTwoNamingTheClosest) {
  struct Binary {
    std::string path;
    std::string typo;        // a known flag misspelt
    std::string suggestion;  // what the error must suggest for it
  };
  for (const Binary& binary :
       {Binary{kTensord, "--max-host-byte=1GiB", "did you mean --max-host-bytes?"},
        Binary{kTensorctl, "--sever=127.0.0.1:1", "did you mean '--server'?"},
        Binary{kTensordBench, "--smok", "did you mean --smoke?"}}) {
    SCOPED_TRACE(binary.path);
    for (const std::vector<std::string>& help :
         {std::vector<std::string>{"--help"}, std::vector<std::string>{"-h"},
          std::vector<std::string>{binary.typo, "--help"}}) {
      const ProgramRun run = RunProgram(binary.path, help);
      EXPECT_EQ(run.exit_code, 0) << help.front() << ": " << run.err;
      EXPECT_THAT(run.out, HasSubstr("sage: ")) << help.front();
    }
    const ProgramRun typo = RunProgram(binary.path, {binary.typo});
    EXPECT_EQ(typo.exit_code, 2) << typo.err;
    EXPECT_THAT(typo.err, HasSubstr(binary.suggestion));
    const ProgramRun help_typo = RunProgram(binary.path, {"--hepl"});
    EXPECT_EQ(help_typo.exit_code, 2) << help_typo.err;
    EXPECT_THAT(help_typo.err, HasSubstr("--hepl"));
    EXPECT_THAT(help_typo.err, HasSubstr("did you mean"));
    const ProgramRun far = RunProgram(binary.path, {"--no-such-flag-anywhere"});
    EXPECT_EQ(far.exit_code, 2) << far.err;
    EXPECT_THAT(far.err, HasSubstr("--no-such-flag-anywhere"));
    EXPECT_THAT(far.err, Not(HasSubstr("did you mean")));
  }
}

TEST(TensordCommandLineTest, HelpExitsZeroWithDashedGroupedFlagsAndNoBuildPaths) {
  for (const char* help : {"--help", "-h"}) {
    SCOPED_TRACE(help);
    const ProgramRun run = RunProgram(kTensord, {help});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    for (const char* group :
         {"\nListening:\n", "\nCapacity:\n", "\nSnapshots and preload:\n", "\nSecurity:\n",
          "\nDevices:\n", "\nLogging and shutdown:\n", "\nInformation:\n"}) {
      EXPECT_THAT(run.out, HasSubstr(group));
    }
    EXPECT_THAT(run.out, HasSubstr("  --max-host-bytes (default 8GiB)\n"));
    EXPECT_THAT(run.out, HasSubstr("  --listen (default 127.0.0.1:50051)\n"));
    EXPECT_THAT(run.out, HasSubstr("  --handoff-allow-uid"));
    // Every flag of server/server_flags.cc sits in a group.
    EXPECT_THAT(run.out, Not(HasSubstr("\nOther:\n")));
    // No flag spelled with underscores, no source paths.
    for (size_t at = run.out.find("--"); at != std::string::npos; at = run.out.find("--", at + 2)) {
      const size_t end = run.out.find_first_not_of("abcdefghijklmnopqrstuvwxyz-_", at + 2);
      EXPECT_EQ(run.out.substr(at, end - at).find('_'), std::string::npos)
          << run.out.substr(at, end - at);
    }
    EXPECT_THAT(run.out, Not(HasSubstr(".cc")));
    EXPECT_THAT(run.out, Not(HasSubstr("Flags from")));
  }
}

TEST(TensordCommandLineTest, HelpWinsOverAMistakeOnTheSameLine) {
  const ProgramRun run = RunProgram(kTensord, {"--no-such-flag", "--help"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("Listening:"));
}

TEST(TensordCommandLineTest, VersionNamesReleaseCommitAndCuda) {
  const ProgramRun run = RunProgram(kTensord, {"--version"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, MatchesRegex("tensord [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit [0-9a-z-]+, "
                                    "CUDA backend (not )?built in\\)\n"));
}

TEST(TensordCommandLineTest, UnknownFlagIsNamedWithTheNearestKnownOne) {
  for (const char* typo : {"--max-host-byte=1GiB", "--max_host_byte=1GiB", "-max-host-byte=1GiB"}) {
    SCOPED_TRACE(typo);
    const ProgramRun run = RunProgram(kTensord, {typo});
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_THAT(run.err, HasSubstr("unknown flag --max-host-byte; did you mean --max-host-bytes?"));
  }
  const ProgramRun far = RunProgram(kTensord, {"--verbose"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_THAT(far.err, HasSubstr("unknown flag --verbose\n"));
  // Abseil's own flags are not tensord's: --helpfull would print source paths.
  EXPECT_EQ(RunProgram(kTensord, {"--helpfull"}).exit_code, 2);
}

TEST(TensordCommandLineTest, StrayArgumentIsRefusedButAFlagValueIsNot) {
  const ProgramRun stray = RunProgram(kTensord, {"serve"});
  EXPECT_EQ(stray.exit_code, 2);
  EXPECT_THAT(stray.err, HasSubstr("unexpected argument 'serve'"));
  // "--log-level chatty": the value is the flag's, so the error is about it.
  const ProgramRun value = RunProgram(kTensord, {"--log-level", "chatty"});
  EXPECT_NE(value.exit_code, 0);
  EXPECT_THAT(value.err, Not(HasSubstr("unexpected argument")));
  EXPECT_THAT(value.err, HasSubstr("chatty"));
}

// Every flag --help lists under "Cluster:" does nothing without
// --etcd-endpoints, so giving one alone is refused, naming it; the list
// comes from --help, so a new cluster flag is covered once it is grouped.
TEST(TensordCommandLineTest, EveryClusterFlagWithoutEtcdEndpointsExitsTwoNamingIt) {
  const ProgramRun help = RunProgram(kTensord, {"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  const size_t begin = help.out.find("\nCluster:\n");
  ASSERT_NE(begin, std::string::npos);
  const std::string section = help.out.substr(begin, help.out.find("\n\n", begin + 1) - begin);
  int checked = 0;
  for (size_t at = section.find("\n  --"); at != std::string::npos;
       at = section.find("\n  --", at + 1)) {
    const size_t end = section.find_first_of(" \n", at + 3);
    const std::string flag = section.substr(at + 1 + 2, end - at - 3);
    if (flag == "--etcd-endpoints") continue;
    // A value of the flag's kind that differs from its default.
    const std::string defaults = section.substr(end, section.find('\n', end) - end);
    std::string value = "x";
    if (defaults.find("(default ") != std::string::npos) {
      const char last = defaults[defaults.size() - 2];  // before ')'
      value = last == 's' || last == 'm' ? "7s" : std::isdigit(last) ? "3" : "x";
    }
    SCOPED_TRACE(flag + "=" + value);
    const ProgramRun run = RunProgram(kTensord, {flag + "=" + value});
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_THAT(run.err,
                HasSubstr(flag + " is set but --etcd-endpoints is not: cluster flags need a "
                                 "cluster to join"));
    ++checked;
  }
  EXPECT_GE(checked, 15) << section;
}

// A value a flag cannot take ends the server before it starts, with exit 2
// and the flag named in its dashed spelling, whatever the flag's type; so
// does a cluster whose only listen address no other node could reach.
TEST(TensordCommandLineTest, AMalformedValueExitsTwoNamingTheFlag) {
  for (const std::vector<std::string>& arguments :
       {std::vector<std::string>{"--max-host-bytes=garbage"},
        std::vector<std::string>{"--huge-pages=maybe"},
        std::vector<std::string>{"--max-tensors=-1"},
        std::vector<std::string>{"--shutdown-grace=soon"},
        std::vector<std::string>{"--device-backend=gpu"},
        std::vector<std::string>{"--handoff-allow-uid=root"},
        std::vector<std::string>{"--listen"}}) {
    SCOPED_TRACE(arguments.front());
    const ProgramRun run = RunProgram(kTensord, arguments);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    const std::string flag = arguments.front().substr(0, arguments.front().find('='));
    EXPECT_THAT(run.err, HasSubstr("tensord: " + flag)) << run.err;
    EXPECT_THAT(run.err, Not(HasSubstr("_"))) << "an underscore spelling leaked: " << run.err;
  }
  const ProgramRun wildcard = RunProgram(
      kTensord, {"--etcd-endpoints=http://127.0.0.1:9", "--listen=0.0.0.0:0", "--node-name=n1"});
  EXPECT_EQ(wildcard.exit_code, 2) << wildcard.err;
  EXPECT_THAT(wildcard.err, HasSubstr("--advertise-address is needed"));
}

// A flag on the command line replaces its TENSORD_* variable, whichever way
// it is spelled. The variable here cannot be parsed, so a server that read
// it stops on it; --log-level=chatty stops one that did not, after every
// flag was parsed, so the error says which of the two the server read.
TEST(TensordEnvironmentTest, AFlagOnTheCommandLineReplacesItsVariableInEverySpelling) {
  const std::vector<std::string> bad_size = {"TENSORD_MAX_HOST_BYTES=garbage"};
  const ProgramRun from_environment = RunProgram(kTensord, {"--log-level=chatty"}, bad_size);
  EXPECT_NE(from_environment.exit_code, 0);
  EXPECT_THAT(from_environment.err, HasSubstr("garbage"));
  for (const std::vector<std::string>& spelling :
       {std::vector<std::string>{"--max-host-bytes=1GiB"},
        std::vector<std::string>{"--max-host-bytes", "1GiB"},
        std::vector<std::string>{"--max_host_bytes=1GiB"},
        std::vector<std::string>{"-max-host-bytes", "1GiB"},
        std::vector<std::string>{"--max_host-bytes", "1GiB"}}) {
    SCOPED_TRACE(spelling.front());
    std::vector<std::string> arguments = spelling;
    arguments.push_back("--log-level=chatty");
    const ProgramRun run = RunProgram(kTensord, arguments, bad_size);
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_THAT(run.err, HasSubstr("chatty"));
    EXPECT_THAT(run.err, Not(HasSubstr("garbage")));
  }
  // A boolean, also in Abseil's --noflag spelling.
  for (const char* spelling : {"--huge-pages", "--nohuge-pages", "--huge_pages=false"}) {
    SCOPED_TRACE(spelling);
    const ProgramRun run =
        RunProgram(kTensord, {spelling, "--log-level=chatty"}, {"TENSORD_HUGE_PAGES=garbage"});
    EXPECT_EQ(run.exit_code, 2);
    EXPECT_THAT(run.err, HasSubstr("chatty"));
    EXPECT_THAT(run.err, Not(HasSubstr("garbage")));
  }
  // Another flag's value that looks like the flag does not give it.
  const ProgramRun as_value = RunProgram(
      kTensord, {"--preload-prefix", "--max-host-bytes", "--log-level=chatty"}, bad_size);
  EXPECT_NE(as_value.exit_code, 0);
  EXPECT_THAT(as_value.err, HasSubstr("garbage"));
}

// --listen gathers every occurrence, so TENSORD_LISTEN (an image sets one)
// used to be served beside the command line's addresses: `podman run IMAGE
// --listen=0.0.0.0:50051` failed with "address in use" against its own.
TEST(TensordEnvironmentTest, ListenOnTheCommandLineReplacesTensordListen) {
  testing::TempDir dir;
  const std::string from_environment = dir.File("from-environment.sock");
  const std::string from_command_line = dir.File("from-command-line.sock");
  testing::ServerProcessOptions options;  // its own --listen=127.0.0.1:0 comes first
  options.flags = {"--listen", "unix:" + from_command_line};
  options.environment = {"TENSORD_LISTEN=unix:" + from_environment};
  absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
      testing::ServerProcess::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->addresses(),
              ElementsAre(StartsWith("127.0.0.1:"), "unix:" + from_command_line));
  struct stat unused;
  EXPECT_NE(::stat(from_environment.c_str(), &unused), 0) << "the variable's socket was bound";
}

// What the handoff socket at `path` answers a peer of this process's uid
// and gid that acquires a name nobody put: NOT_FOUND when it admits the
// peer, PERMISSION_DENIED when it does not.
absl::StatusCode HandoffAnswerToThisProcess(const std::string& path) {
  absl::StatusOr<ScopedFd> socket = ConnectSeqpacket(path);
  if (!socket.ok()) return socket.status().code();
  v1::HandoffRequest request;
  request.set_request_id(1);
  request.mutable_acquire()->set_name("nobody/put/this");
  if (absl::Status sent = SendPacket(socket->get(), request.SerializeAsString()); !sent.ok()) {
    return sent.code();
  }
  absl::StatusOr<ReceivedPacket> packet = ReceivePacket(socket->get());
  if (!packet.ok()) return packet.status().code();
  v1::HandoffResponse response;
  if (!response.ParseFromString(packet->bytes)) return absl::StatusCode::kDataLoss;
  return static_cast<absl::StatusCode>(response.code());
}

// Starts tensord with a handoff socket, `flags` and `environment`, and says
// how the socket answers this process.
absl::StatusCode HandoffAnswerWith(const std::vector<std::string>& flags,
                                   const std::vector<std::string>& environment) {
  testing::TempDir dir;
  const std::string socket_path = dir.File("handoff.sock");
  testing::ServerProcessOptions options;
  options.flags = {"--handoff-socket=" + socket_path};
  options.flags.insert(options.flags.end(), flags.begin(), flags.end());
  options.environment = environment;
  absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
      testing::ServerProcess::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return server.status().code();
  return HandoffAnswerToThisProcess(socket_path);
}

TEST(TensordEnvironmentTest, HandoffAllowUidOnTheCommandLineReplacesItsVariable) {
  const std::string own_uid = std::to_string(::getuid());
  const std::string other_uid = std::to_string(::getuid() + 4242);
  // The variable alone is read: it can shut this process out.
  EXPECT_EQ(HandoffAnswerWith({}, {"TENSORD_HANDOFF_ALLOW_UID=" + other_uid}),
            absl::StatusCode::kPermissionDenied);
  // The command line's list replaces the variable's instead of adding to it.
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--handoff-allow-uid=" + other_uid},
        std::vector<std::string>{"--handoff_allow_uid", other_uid}}) {
    SCOPED_TRACE(flags.front());
    EXPECT_EQ(HandoffAnswerWith(flags, {"TENSORD_HANDOFF_ALLOW_UID=" + own_uid + "," + other_uid}),
              absl::StatusCode::kPermissionDenied);
  }
}

TEST(TensordEnvironmentTest, HandoffAllowGidOnTheCommandLineReplacesItsVariable) {
  const std::string other_uid = absl::StrCat("--handoff-allow-uid=", ::getuid() + 4242);
  const std::string own_gid = std::to_string(::getgid());
  const std::string other_gid = std::to_string(::getgid() + 4242);
  // The variable alone is read: it lets this process in by its gid.
  EXPECT_EQ(HandoffAnswerWith({other_uid}, {"TENSORD_HANDOFF_ALLOW_GID=" + own_gid}),
            absl::StatusCode::kNotFound);
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{other_uid, "--handoff-allow-gid=" + other_gid},
        std::vector<std::string>{other_uid, "-handoff-allow-gid", other_gid}}) {
    SCOPED_TRACE(flags.back());
    EXPECT_EQ(HandoffAnswerWith(flags, {"TENSORD_HANDOFF_ALLOW_GID=" + own_gid}),
              absl::StatusCode::kPermissionDenied);
  }
}

TEST(TensorctlCommandLineTest, VersionMatchesTheServers) {
  const ProgramRun tensorctl = RunProgram(kTensorctl, {"--version"});
  EXPECT_EQ(tensorctl.exit_code, 0) << tensorctl.err;
  const ProgramRun tensord = RunProgram(kTensord, {"--version"});
  ASSERT_THAT(tensorctl.out, HasSubstr("tensorctl "));
  EXPECT_EQ(tensorctl.out.substr(std::string("tensorctl").size()),
            tensord.out.substr(std::string("tensord").size()));
}

TEST(TensorctlCommandLineTest, HelpExitsZeroAndTyposGetASuggestion) {
  const ProgramRun help = RunProgram(kTensorctl, {"--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out, HasSubstr("tensorctl --version"));

  const ProgramRun command = RunProgram(kTensorctl, {"gte", "w"});
  EXPECT_EQ(command.exit_code, 2);
  EXPECT_THAT(command.err, HasSubstr("unknown command 'gte'; did you mean 'get'?"));

  const ProgramRun option = RunProgram(kTensorctl, {"get", "w", "--outptu", "w.npy"});
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_THAT(option.err, HasSubstr("unknown option '--outptu'; did you mean '--output'?"));
}

// A .npy file of `bytes` as uint8 of shape (N,), as numpy writes it.
std::string NpyOfBytes(const std::vector<uint8_t>& bytes) {
  std::string header =
      absl::StrCat("{'descr': '|u1', 'fortran_order': False, 'shape': (", bytes.size(), ",), }");
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string file = "\x93NUMPY\x01";
  file += '\0';  // format version 1.0
  file += static_cast<char>(header.size() & 0xff);
  file += static_cast<char>(header.size() >> 8);
  file += header;
  file.append(bytes.begin(), bytes.end());
  return file;
}

TEST(TensorctlBatchTest, PutManyAndGetManyMoveADirectoryOfNpyFiles) {
  absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
      testing::ServerProcess::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  testing::TempDir dir;
  ASSERT_EQ(::mkdir(dir.File("in").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(dir.File("in/layer1").c_str(), 0700), 0);
  const std::vector<std::string> names = {"embed", "layer1/bias", "layer1/weight"};
  std::vector<std::vector<uint8_t>> contents;
  for (size_t i = 0; i < names.size(); ++i) {
    contents.push_back(testing::PatternBytes(i == 2 ? 200 * 1024 : 1000 + i, i));
    testing::WriteFile(dir.File("in/" + names[i] + ".npy"), NpyOfBytes(contents.back()));
  }
  testing::WriteFile(dir.File("in/notes.txt"), "not a tensor");
  const std::string server_flag = "--server=" + (*server)->address();

  const ProgramRun put = RunProgram(
      kTensorctl, {"put-many", dir.File("in"), "--prefix", "m/", "--atomic", server_flag});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_THAT(put.out, HasSubstr("3 of 3 tensors"));
  EXPECT_THAT(put.out, HasSubstr("group version"));
  std::unique_ptr<Client> client =
      testing::ConnectClient((*server)->address(), testing::RemoteClientOptions());
  ASSERT_NE(client, nullptr);
  absl::StatusOr<std::vector<Tensor>> stored = client->BatchFetchPrefix("m/");
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 3u);
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ((*stored)[i].info().name, "m/" + names[i]);
    EXPECT_EQ((*stored)[i].info().version, (*stored)[0].info().version);  // one group
    EXPECT_EQ(testing::TensorBytes((*stored)[i]), contents[i]);
  }

  const ProgramRun get =
      RunProgram(kTensorctl, {"get-many", "m/layer1/", "-o", dir.File("out"), server_flag});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_THAT(get.out, HasSubstr("2 tensors"));
  for (size_t i : {1, 2}) {
    const std::string file = ReadFile(dir.File("out/" + names[i].substr(7) + ".npy"));
    ASSERT_GE(file.size(), contents[i].size()) << names[i];
    EXPECT_EQ(file.substr(file.size() - contents[i].size()),
              std::string(contents[i].begin(), contents[i].end()))
        << names[i];
  }

  // A cluster group needs its number, and a cluster: a single node says so.
  const ProgramRun unnumbered =
      RunProgram(kTensorctl, {"get-many", "m/", "--cluster", "-o", dir.File("out2"), server_flag});
  EXPECT_NE(unnumbered.exit_code, 0);
  EXPECT_THAT(unnumbered.err, HasSubstr("--version N"));
  const ProgramRun single = RunProgram(kTensorctl, {"get-many", "m/", "--cluster", "--version", "5",
                                                    "-o", dir.File("out2"), server_flag});
  EXPECT_NE(single.exit_code, 0);
  EXPECT_THAT(single.err, HasSubstr("not a cluster node"));

  // A bad file stops the command before anything is sent.
  testing::WriteFile(dir.File("in/broken.npy"), "not npy");
  const ProgramRun broken =
      RunProgram(kTensorctl, {"put-many", dir.File("in"), "--prefix", "x/", server_flag});
  EXPECT_NE(broken.exit_code, 0);
  EXPECT_THAT(broken.err, HasSubstr("broken.npy"));
  absl::StatusOr<ListResult> none = client->List("x/");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->tensors.empty());
}

// get streams a C-order tensor to its file in ranged fetches (16 MiB) and
// O_DIRECT blocks (4 MiB) with a buffered tail; --streams takes the whole
// fetch path. Both files, and standard output, hold exactly the bytes; and
// put --streams sends the file back in parts.
TEST(TensorctlGetTest, GetWritesEveryByteThroughRangesAndStreams) {
  absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
      testing::ServerProcess::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<Client> client =
      testing::ConnectClient((*server)->address(), testing::RemoteClientOptions());
  ASSERT_NE(client, nullptr);
  const std::vector<uint8_t> bytes = testing::PatternBytes((size_t{36} << 20) + 12345, 7);
  testing::HostTensor tensor = testing::CompactTensor(DLDataType{kDLUInt, 8, 1},
                                                      {static_cast<int64_t>(bytes.size())}, bytes);
  ASSERT_TRUE(client->Put("g/big", tensor.dl()).ok());
  testing::HostTensor small =
      testing::CompactTensor(DLDataType{kDLUInt, 8, 1}, {5}, {1, 2, 3, 4, 5});
  ASSERT_TRUE(client->Put("g/small", small.dl()).ok());
  testing::TempDir dir;
  const std::string server_flag = "--server=" + (*server)->address();
  const std::string expected(bytes.begin(), bytes.end());
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--streams", "2"}}) {
    std::vector<std::string> arguments = {"get", "g/big", "-o", dir.File("big.npy"), server_flag};
    arguments.insert(arguments.end(), extra.begin(), extra.end());
    const ProgramRun get = RunProgram(kTensorctl, arguments);
    ASSERT_EQ(get.exit_code, 0) << get.err;
    const std::string file = ReadFile(dir.File("big.npy"));
    ASSERT_GT(file.size(), expected.size());
    EXPECT_TRUE(file.compare(file.size() - expected.size(), expected.size(), expected) == 0)
        << (extra.empty() ? "ranged" : "--streams 2");
    // .npy 1.0: magic, version, a little-endian header length, the header.
    ASSERT_EQ(file.substr(0, 6), "\x93NUMPY");
    const size_t data_offset =
        10 + static_cast<uint8_t>(file[8]) + 256 * static_cast<uint8_t>(file[9]);
    EXPECT_EQ(data_offset, file.size() - expected.size());
  }
  const ProgramRun to_stdout = RunProgram(kTensorctl, {"get", "g/small", "-o", "-", server_flag});
  ASSERT_EQ(to_stdout.exit_code, 0) << to_stdout.err;
  EXPECT_TRUE(to_stdout.out.ends_with(std::string("\x01\x02\x03\x04\x05")));
  const ProgramRun too_many = RunProgram(
      kTensorctl, {"get", "g/small", "-o", dir.File("s.npy"), "--streams", "9", server_flag});
  EXPECT_NE(too_many.exit_code, 0);
  EXPECT_THAT(too_many.err, HasSubstr("--streams 9 must be 1..8"));

  // put --streams 2 sends the file back in two parts, one version.
  const ProgramRun put = RunProgram(
      kTensorctl, {"put", "g/again", dir.File("big.npy"), "--streams", "2", server_flag});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  absl::StatusOr<Tensor> again = client->Fetch("g/again");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(testing::BytesEqual(again->dl_tensor().data, again->data_bytes(), bytes));
  const ProgramRun put_too_many = RunProgram(
      kTensorctl, {"put", "g/again", dir.File("big.npy"), "--streams", "9", server_flag});
  EXPECT_NE(put_too_many.exit_code, 0);
  EXPECT_THAT(put_too_many.err, HasSubstr("--streams 9 must be 1..8"));
}

TEST(TensorctlWatchTest, WatchPrintsChangesAndThePositionToResumeFrom) {
  absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server =
      testing::ServerProcess::Start({});
  ASSERT_TRUE(server.ok()) << server.status();
  std::unique_ptr<Client> client =
      testing::ConnectClient((*server)->address(), testing::RemoteClientOptions());
  ASSERT_NE(client, nullptr);
  testing::HostTensor tensor =
      testing::CompactTensor(DLDataType{kDLFloat, 32, 1}, {2, 3}, testing::PatternBytes(24, 1));
  absl::StatusOr<TensorInfo> first = client->Put("w/a", tensor.dl());
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<TensorInfo> second = client->Put("w/b", tensor.dl());
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(client->Delete("w/a").ok());
  const std::string server_flag = "--server=" + (*server)->address();

  const ProgramRun existing =
      RunProgram(kTensorctl, {"watch", "w/", "--existing", "--count", "1", server_flag});
  ASSERT_EQ(existing.exit_code, 0) << existing.err;
  EXPECT_EQ(existing.out, absl::StrCat(second->version, " existing w/b float32[2,3] 24 B\n"));

  const ProgramRun resumed = RunProgram(
      kTensorctl,
      {"watch", "w/", "--from", std::to_string(first->version), "--count", "2", server_flag});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(resumed.out,
            absl::StrCat(second->version, " published w/b float32[2,3] 24 B\n", second->version + 1,
                         " deleted w/a (version ", first->version, ")\n"));
  EXPECT_THAT(resumed.err, HasSubstr(absl::StrCat("position ", second->version + 1)));

  // --for ends a quiet watch with success; a bad duration is a usage error.
  const ProgramRun quiet = RunProgram(kTensorctl, {"watch", "w/", "--for", "200ms", server_flag});
  EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.out, "");
  const ProgramRun bad = RunProgram(kTensorctl, {"watch", "w/", "--for", "soon", server_flag});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("--for 'soon'"));
}

}  // namespace
}  // namespace tensord
