// tensord-bench: starts its own tensord (and an empty-call gRPC server) and
// prints one table of tensord's throughput, latency and memory, each as a
// ratio to a baseline measured in the same run. Never asserts on times: it
// exits non-zero only when something functional broke (wrong bytes, a
// failed call, a server that died).
//
//   tensord-bench [--smoke] [--json PATH] [--sections LIST] [--tensord PATH]
//                 [--device-backend auto|cuda|simulated]
//   tensord-bench --help
//
// The cluster section (its own etcd and three tensord nodes) runs only when
// --sections names it.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/call_loop.h"
#include "bench/cases.h"
#include "bench/empty_server.h"
#include "service/common/absl_view.h"
#include "service/common/closest_name.h"
#include "service/common/status_macros.h"
#include "tests/process/child_process.h"

#ifndef TENSORD_BINARY_PATH
#error "TENSORD_BINARY_PATH must name the tensord binary (set by bench/CMakeLists.txt)"
#endif

namespace tensord::bench {
namespace {

using testing::ChildProcess;
using testing::TempDir;

constexpr char kUsage[] =
    "usage: tensord-bench [--smoke] [--json PATH] [--sections LIST] [--tensord PATH]\n"
    "                     [--device-backend auto|cuda|simulated]\n"
    "       tensord-bench --help\n"
    "  --smoke          a short run (small sizes, few repeats) that checks the benchmark works\n"
    "  --json PATH      also write every row as JSON to PATH\n"
    "  --sections LIST  run only these, comma-separated: memory,remote,small,local,batch,\n"
    "                   device (default: these six), cluster (opt-in: starts /usr/bin/etcd\n"
    "                   and three tensord nodes of its own)\n"
    "  --device-backend tensord's device backend for the device section (default auto: CUDA\n"
    "                   when a GPU is present, else the section is skipped; simulated anywhere)\n"
    "  --tensord PATH   the tensord binary to start (default: the one built with this)\n"
    "  --help, -h       show this text and exit\n";

// The flags kUsage names, for "did you mean"; the hidden ones are left out.
constexpr std::string_view kDocumentedFlags[] = {"smoke",   "json",           "sections",
                                                 "tensord", "device-backend", "help"};

struct CommandLine {
  bool help = false;
  bool smoke = false;
  std::string json_path;
  std::string tensord = TENSORD_BINARY_PATH;
  std::string sections = "memory,remote,small,local,batch,device";
  std::string device_backend = "auto";
  // Hidden: run as the empty-call server.
  std::string serve_empty;
  bool serve_empty_closing_idle = false;
  std::string ready_file;
  // Hidden: one client's small calls, for an instruction count (call_loop.h).
  std::string call_loop;
  std::string target;
  std::string calls = "1000";
};

// Accepts "--flag=value" and "--flag value".
absl::StatusOr<CommandLine> ParseCommandLine(int argc, char** argv) {
  CommandLine line;
  // --help wins over any mistake on the same line, as with tensord.
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      line.help = true;
      return line;
    }
  }
  for (int i = 1; i < argc; ++i) {
    std::string argument = argv[i];
    auto value_of = [&](absl::string_view flag, std::string* out) -> absl::StatusOr<bool> {
      if (absl::StartsWith(argument, absl::StrCat(flag, "="))) {
        *out = argument.substr(flag.size() + 1);
        return true;
      }
      if (argument != flag) return false;
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
      *out = argv[++i];
      return true;
    };
    if (argument == "--smoke") {
      line.smoke = true;
      continue;
    }
    if (argument == "--serve-empty-closing-idle") {
      line.serve_empty_closing_idle = true;
      continue;
    }
    bool matched = false;
    for (auto [flag, out] :
         {std::pair{"--json", &line.json_path}, std::pair{"--tensord", &line.tensord},
          std::pair{"--sections", &line.sections},
          std::pair{"--device-backend", &line.device_backend},
          std::pair{"--serve-empty", &line.serve_empty},
          std::pair{"--ready-file", &line.ready_file}, std::pair{"--call-loop", &line.call_loop},
          std::pair{"--target", &line.target}, std::pair{"--calls", &line.calls}}) {
      TENSORD_ASSIGN_OR_RETURN(bool found, value_of(flag, out));
      if (found) {
        matched = true;
        break;
      }
    }
    if (matched) continue;
    if (!argument.starts_with("-")) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", argument, "': tensord-bench takes only flags"));
    }
    const std::string flag = argument.substr(0, argument.find('='));
    std::string message = absl::StrCat("unknown flag ", flag);
    const std::string_view name =
        std::string_view(flag).substr(std::min(flag.find_first_not_of('-'), flag.size()));
    if (std::optional<std::string_view> near = ClosestName(name, kDocumentedFlags)) {
      absl::StrAppend(&message, "; did you mean --", AsAbsl(*near), "?");
    }
    return absl::InvalidArgumentError(message);
  }
  for (absl::string_view name : absl::StrSplit(line.sections, ',', absl::SkipEmpty())) {
    if (name != "memory" && name != "remote" && name != "small" && name != "local" &&
        name != "batch" && name != "device" && name != "cluster") {
      return absl::InvalidArgumentError(
          absl::StrCat("--sections: unknown section '", name,
                       "' (memory, remote, small, local, batch, device, cluster)"));
    }
  }
  if (line.device_backend != "auto" && line.device_backend != "cuda" &&
      line.device_backend != "simulated") {
    return absl::InvalidArgumentError(absl::StrCat("--device-backend: '", line.device_backend,
                                                   "' is not auto, cuda or simulated"));
  }
  return line;
}

std::string SelfPath() {
  char path[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length <= 0) return "";
  return std::string(path, static_cast<size_t>(length));
}

absl::Status Run(const CommandLine& line) {
  const Clock::time_point begun = Clock::now();
  const BenchConfig config = line.smoke ? SmokeConfig() : FullConfig();
  TENSORD_ASSIGN_OR_RETURN(TempDir dir, TempDir::Create("tensord-bench-"));

  TENSORD_ASSIGN_OR_RETURN(
      std::unique_ptr<ChildProcess> tensord,
      ChildProcess::StartWithReadyFile(
          {.argv = {line.tensord, "--listen=127.0.0.1:0", "--ready-file=" + dir.path() + "/ready",
                    "--handoff-socket=" + dir.path() + "/handoff.sock", "--max-host-bytes=6GiB",
                    "--max-tensor-bytes=2GiB", "--log-level=warning",
                    "--device-backend=" + line.device_backend},
           .log_path = dir.path() + "/tensord.log"},
          dir.path() + "/ready", absl::Seconds(30)));
  TENSORD_ASSIGN_OR_RETURN(
      std::unique_ptr<ChildProcess> empty_server,
      ChildProcess::StartWithReadyFile({.argv = {SelfPath(), "--serve-empty=127.0.0.1:0",
                                                 "--ready-file=" + dir.path() + "/empty-ready"},
                                        .log_path = dir.path() + "/empty.log"},
                                       dir.path() + "/empty-ready", absl::Seconds(30)));
  // The same, closing idle connections as tensord does by default: what
  // that costs every small call (a reference row of the small section).
  TENSORD_ASSIGN_OR_RETURN(
      std::unique_ptr<ChildProcess> empty_closing_idle_server,
      ChildProcess::StartWithReadyFile(
          {.argv = {SelfPath(), "--serve-empty=127.0.0.1:0", "--serve-empty-closing-idle",
                    "--ready-file=" + dir.path() + "/empty-closing-idle-ready"},
           .log_path = dir.path() + "/empty-closing-idle.log"},
          dir.path() + "/empty-closing-idle-ready", absl::Seconds(30)));

  TENSORD_ASSIGN_OR_RETURN(Buffer source, Buffer::Allocate(config.LargestBytes()));
  TENSORD_ASSIGN_OR_RETURN(Buffer destination, Buffer::Allocate(config.LargestBytes()));
  FillPattern(source.data(), source.size(), kPatternSeed);

  Report report;
  report.Section(kBaselineSection,
                 "what the machine allows; every ratio below is against one of these");
  report.Section(kRemoteSection,
                 "GB/s = 1e9 bytes/s; ratio vs a raw TCP request/response of the same bytes "
                 "measured just before");
  report.Section(kSmallOpSection,
                 "time-bounded loops; ratio vs the empty call at the same concurrency "
                 "(rate: higher is better; p50/p99: lower is better)");
  report.Section(kLocalSection,
                 "per-fetch latency (median); first touch is the consumer's cost, reported "
                 "apart from the fetch");
  report.Section(kBatchSection,
                 "one call of N tensors; tensors/s vs N single calls of the same tensors (the "
                 "batch speedup), GB/s vs raw TCP of the same N x size bytes, single calls vs N "
                 "empty calls; all in the same rounds");
  report.Section(kDeviceSection,
                 "GB/s; ratio vs raw TCP of the same bytes in the same rounds; the device "
                 "copies are this process's own, through the same backend kind");
  report.Section(kClusterSection,
                 "ratio vs the row named, measured in the same rounds (GB/s: higher is better; "
                 "us: lower is better); the single node is the bench's own tensord");
  report.Section(kMemorySection,
                 "tensord's /proc/PID/status sampled while one client fetches the tensor; "
                 "stored tensors live in memfd (shmem) pages");
  BenchEnv env{.config = config,
               .report = report,
               .tensord_target = tensord->ready_lines().front(),
               .tensord_pid = tensord->pid(),
               .empty_target = empty_server->ready_lines().front(),
               .empty_pid = empty_server->pid(),
               .empty_closing_idle_target = empty_closing_idle_server->ready_lines().front(),
               .empty_closing_idle_pid = empty_closing_idle_server->pid(),
               .device_backend = line.device_backend,
               .tensord_binary = line.tensord,
               .source = source,
               .destination = destination};

  struct Step {
    const char* name;
    absl::Status (*run)(const BenchEnv&);
  };
  const std::vector<std::string> wanted = absl::StrSplit(line.sections, ',', absl::SkipEmpty());
  // Memory first, while the server holds nothing else.
  for (const Step& step : {Step{"memory", &RunMemorySection}, Step{"remote", &RunRemoteSection},
                           Step{"small", &RunSmallOpSection}, Step{"local", &RunLocalSection},
                           Step{"batch", &RunBatchSection}, Step{"device", &RunDeviceSection},
                           Step{"cluster", &RunClusterSection}}) {
    if (std::find(wanted.begin(), wanted.end(), step.name) == wanted.end()) continue;
    const Clock::time_point start = Clock::now();
    absl::Status status = step.run(env);
    if (!status.ok() || !tensord->Alive()) {
      return absl::Status(status.ok() ? absl::StatusCode::kUnavailable : status.code(),
                          absl::StrCat(step.name, " section failed: ",
                                       status.ok() ? "tensord exited" : status.message(),
                                       "\n---- tensord log (tail) ----\n", tensord->LogTail()));
    }
    std::fprintf(stderr, "tensord-bench: %s section done in %.1f s\n", step.name,
                 SecondsSince(start));
  }

  if (std::find(wanted.begin(), wanted.end(), "cluster") == wanted.end()) {
    std::fprintf(stderr,
                 "tensord-bench: cluster section not run (opt-in: --sections ...,cluster)\n");
  }
  std::printf("tensord-bench (%s): %u CPUs, gRPC %s, tensord pid %d, total %.1f s\n",
              config.mode.c_str(), std::thread::hardware_concurrency(), grpc::Version().c_str(),
              static_cast<int>(tensord->pid()), SecondsSince(begun));
  std::fputs(report.Format().c_str(), stdout);
  std::fflush(stdout);
  if (!line.json_path.empty())
    TENSORD_RETURN_IF_ERROR(report.WriteJson(line.json_path, config.mode));
  return absl::OkStatus();
}

}  // namespace
}  // namespace tensord::bench

int main(int argc, char** argv) {
  absl::StatusOr<tensord::bench::CommandLine> line = tensord::bench::ParseCommandLine(argc, argv);
  if (!line.ok()) {
    std::fprintf(stderr, "tensord-bench: %s\nRun 'tensord-bench --help' for the flags.\n",
                 std::string(line.status().message()).c_str());
    return 2;
  }
  if (line->help) {
    std::fputs(tensord::bench::kUsage, stdout);
    return 0;
  }
  if (!line->serve_empty.empty()) {
    return tensord::bench::ServeEmpty(line->serve_empty, line->ready_file,
                                      line->serve_empty_closing_idle);
  }
  // The benchmark's clients move large tensors, as a real program would
  // tune its process for (the empty server above has no client).
  tensord::TuneMallocForTransfers();
  if (!line->call_loop.empty()) {
    uint64_t calls = 0;
    if (!absl::SimpleAtoi(line->calls, &calls) || line->target.empty()) {
      std::fprintf(stderr,
                   "tensord-bench: --call-loop needs --target=ADDR and --calls=N (got '%s')\n",
                   line->calls.c_str());
      return 2;
    }
    return tensord::bench::RunCallLoop(line->call_loop, line->target, calls);
  }
  if (absl::Status status = tensord::bench::Run(*line); !status.ok()) {
    std::fprintf(stderr, "tensord-bench: FAILED: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
