// tensord's composition root: the command line (command_line.cc) and the
// checked flags (server_flags.cc) in, then the server, its cluster node,
// preload, metrics and the ready file started in order, and on SIGTERM or
// SIGINT taken down in the reverse order. Everything else lives in the
// service/ libraries.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/cluster_node_host.h"
#include "server/command_line.h"
#include "server/device_selection.h"
#include "server/handoff_socket_path.h"
#include "server/metrics_exporter.h"
#include "server/preload.h"
#include "server/server_flags.h"
#include "service/common/build_info.h"
#include "service/common/fd_limits.h"
#include "service/common/log.h"
#include "service/common/malloc_tuning.h"
#include "service/security/openssl_lifetime.h"
#include "service/transport/connection_listener.h"
#include "service/transport/tensor_server.h"

namespace tensord {
namespace {

// Removes the directory made for an "auto" handoff socket once the server
// (and with it the socket) is gone, however Serve returns.
struct DirectoryRemover {
  std::string path;
  ~DirectoryRemover() {
    if (!path.empty()) ::rmdir(path.c_str());
  }
};

// --handoff-socket: "auto" picks a per-user path (and maybe makes a private
// directory for it), "off" or empty turns the socket off, anything else is
// the path.
absl::Status ResolveHandoffSocket(const std::string& flag, ServerOptions& options,
                                  DirectoryRemover& made) {
  if (flag == "off") return absl::OkStatus();
  if (flag != "auto") {
    options.handoff.socket_path = flag;
    return absl::OkStatus();
  }
  absl::StatusOr<HandoffSocketPath> chosen = DefaultHandoffSocketPath();
  if (!chosen.ok()) {
    return absl::UnavailableError(absl::StrCat("--handoff-socket=auto: ", chosen.status().message(),
                                               "; give a path, or off"));
  }
  options.handoff.socket_path = chosen->path;
  made.path = chosen->private_directory;
  return absl::OkStatus();
}

// What the server needs from the machine before it starts: the snapshot
// directory, the device backend.
absl::Status PrepareResources(const TensordConfig& config, ServerOptions& options) {
  if (!options.snapshot_dir.empty() && ::mkdir(options.snapshot_dir.c_str(), 0700) != 0 &&
      errno != EEXIST) {
    return absl::UnavailableError(
        absl::StrCat("--snapshot-dir ", options.snapshot_dir, ": ", std::strerror(errno)));
  }
  absl::StatusOr<std::shared_ptr<DeviceBackend>> device_backend =
      SelectDeviceBackend(config.devices);
  if (!device_backend.ok()) return device_backend.status();
  options.registry.device_backend = std::move(*device_backend);
  return absl::OkStatus();
}

// Process-wide settings, before gRPC starts its threads. Returns the
// signals that stop the server, blocked in every thread (sigwait takes them).
sigset_t PrepareProcess() {
  // Freed gRPC receive buffers stay for the next put; the service hands
  // them back once puts stop (IdleHeapTrim).
  KeepFreedHeapForTransfers();
  // gRPC uses absl::Mutex; Debian's Abseil keeps deadlock detection on,
  // which shows in every call's profile.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Every version is a memfd: allow as many fds as the hard limit does.
  if (rlimit limit{}; getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return signals;
}

absl::Status WriteReadyFile(const std::string& path, const std::vector<std::string>& addresses) {
  std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << absl::StrJoin(addresses, "\n") << "\n";
    if (!out.good()) return absl::UnavailableError(absl::StrCat("cannot write ", temporary));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot rename ", temporary, " to ", path));
  }
  return absl::OkStatus();
}

void LogServing(const TensorServer& server, const ServerOptions& options,
                const ClusterNodeHost* cluster) {
  const DeviceBackend* devices = options.registry.device_backend.get();
  Log(LogLevel::kInfo, "serving",
      {{"addresses", absl::StrJoin(server.bound_addresses(), ",")},
       {"handoff_socket", options.handoff.socket_path},
       {"max_host_bytes", options.registry.max_host_bytes},
       {"max_connections", server.listener().max_connections()},
       {"open_file_limit", OpenFileLimit()},
       {"device_backend", devices == nullptr
                              ? std::string("none")
                              : absl::StrCat(devices->name(), " x", devices->device_count())},
       {"tls",
        options.tls.enabled() ? (options.tls.client_ca_pem.empty() ? "on" : "mutual") : "off"},
       {"auth", options.token_grants.empty() ? "off" : "tokens"},
       {"cluster",
        cluster == nullptr ? std::string("off") : absl::StrCat("node ", cluster->node_name())},
       {"pid", getpid()}});
}

// After the server stopped (every acknowledged put is in the registry and
// no call can publish): the snapshot, when --snapshot-dir asks for one.
int WriteShutdownSnapshot(TensorServer& server) {
  SnapshotStore* snapshots = server.snapshots();
  if (snapshots == nullptr) return 0;
  absl::StatusOr<SnapshotSummary> written = snapshots->Write(server.registry());
  if (written.ok()) return 0;
  Log(LogLevel::kError, "shutdown_snapshot_failed", {{"error", written.status().ToString()}});
  return 1;
}

// Runs the configured server until SIGTERM or SIGINT. Exit code 1 with an
// error logged when anything fails to start.
int Serve(TensordConfig config) {
  ServerOptions& options = config.server;
  DirectoryRemover handoff_directory;
  absl::Status prepared =
      ResolveHandoffSocket(config.handoff_socket_flag, options, handoff_directory);
  if (prepared.ok()) prepared = PrepareResources(config, options);
  std::unique_ptr<ClusterNodeHost> cluster;
  if (prepared.ok() && config.cluster.has_value()) {
    absl::StatusOr<std::unique_ptr<ClusterNodeHost>> created =
        ClusterNodeHost::Create(std::move(*config.cluster), config.advertise_address);
    prepared = created.status();
    if (created.ok()) {
      cluster = std::move(*created);
      options.cluster = cluster->deferred();
      options.cluster_access = cluster->deferred();
    }
  }
  if (!prepared.ok()) {
    Log(LogLevel::kError, "start_failed", {{"error", prepared.ToString()}});
    return 1;
  }
  sigset_t signals = PrepareProcess();
  absl::StatusOr<std::unique_ptr<TensorServer>> started = TensorServer::Start(options);
  if (!started.ok()) {
    Log(LogLevel::kError, "start_failed", {{"error", started.status().ToString()}});
    return 1;
  }
  TensorServer& server = **started;
  if (!config.preload.empty()) {
    absl::StatusOr<uint64_t> loaded =
        PreloadSafetensors(server.registry(), config.preload, config.preload_prefix);
    if (!loaded.ok()) {
      Log(LogLevel::kError, "preload_failed",
          {{"file", config.preload}, {"error", loaded.status().ToString()}});
      return 1;
    }
  }
  if (cluster != nullptr && !cluster->Join(server, options).ok()) return 1;
  std::unique_ptr<MetricsExporter> metrics;
  if (!config.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsExporter>> exporting =
        MetricsExporter::Start(config.metrics_listen, server);
    if (!exporting.ok()) {
      Log(LogLevel::kError, "metrics_failed", {{"error", exporting.status().ToString()}});
      return 1;
    }
    metrics = std::move(*exporting);
    Log(LogLevel::kInfo, "metrics_serving",
        {{"address", metrics->bound_address()}, {"path", "/metrics"}});
  }
  LogServing(server, options, cluster.get());
  if (!config.ready_file.empty()) {
    if (absl::Status written = WriteReadyFile(config.ready_file, server.bound_addresses());
        !written.ok()) {
      Log(LogLevel::kError, "ready_file_failed", {{"error", written.ToString()}});
      return 1;
    }
  }

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  Log(LogLevel::kInfo, "shutting_down",
      {{"signal", strsignal(signal_number)},
       {"grace", absl::FormatDuration(options.shutdown_grace)}});
  // Leave the cluster first, so others stop counting on this node while
  // calls drain (writes are refused from here on; reads go on).
  if (cluster != nullptr) cluster->Leave();
  server.Shutdown(options.shutdown_grace);
  server.Wait();
  if (cluster != nullptr) cluster->Stop();
  const int exit_code = WriteShutdownSnapshot(server);
  Log(LogLevel::kInfo, "stopped");
  return exit_code;
}

int Run(int argc, char** argv) {
  // Before gRPC's first TLS credentials initialise OpenSSL.
  if (absl::Status kept = KeepOpenSslThroughExit(); !kept.ok()) {
    Log(LogLevel::kWarning, "openssl_init_failed", {{"error", kept.ToString()}});
  }
  absl::StatusOr<CommandLineRequest> request =
      ParseServerCommandLine(std::span<char* const>(argv, argc).subspan(argc > 0 ? 1 : 0));
  if (request.ok() && *request == CommandLineRequest::kHelp) {
    std::fputs(ServerHelpText().c_str(), stdout);
    return 0;
  }
  if (request.ok() && *request == CommandLineRequest::kVersion) {
    std::printf("%s\n", VersionLine("tensord").c_str());
    return 0;
  }
  absl::StatusOr<TensordConfig> config = request.ok() ? OptionsFromFlags() : request.status();
  if (!config.ok()) {  // the one way a mistake in the flags ends: exit 2
    std::fprintf(stderr, "tensord: %s\nRun 'tensord --help' for the flags.\n",
                 std::string(config.status().message()).c_str());
    return 2;
  }
  SetMinLogLevel(config->log_level);
  return Serve(std::move(*config));
}

}  // namespace
}  // namespace tensord

int main(int argc, char** argv) { return tensord::Run(argc, argv); }
