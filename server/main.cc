// tensord: flags (also from TENSORD_* environment variables), wiring,
// signals. Everything else lives in the service/ libraries.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/command_line.h"
#include "server/device_selection.h"
#include "server/handoff_socket_path.h"
#include "server/metrics_exporter.h"
#include "server/preload.h"
#include "service/cluster/cluster_config.h"
#include "service/cluster/cluster_node.h"
#include "service/cluster/deferred_cluster.h"
#include "service/cluster/etcd_client.h"
#include "service/cluster/peer_channels.h"
#include "service/common/absl_view.h"
#include "service/common/build_info.h"
#include "service/common/byte_size.h"
#include "service/common/fd_limits.h"
#include "service/common/log.h"
#include "service/common/malloc_tuning.h"
#include "service/common/pem_source.h"
#include "service/security/openssl_lifetime.h"
#include "service/security/token_file.h"
#include "service/transport/connection_listener.h"
#include "service/transport/tensor_server.h"

// A byte-size flag value that accepts "8GiB", "512M", "4096".
struct ByteSizeFlag {
  uint64_t bytes = 0;
};
bool AbslParseFlag(absl::string_view text, ByteSizeFlag* flag, std::string* error) {
  absl::StatusOr<uint64_t> bytes = tensord::ParseByteSize(text);
  if (!bytes.ok()) {
    *error = std::string(bytes.status().message());
    return false;
  }
  flag->bytes = *bytes;
  return true;
}
// "8GiB" rather than 8589934592, so --help shows defaults as users write them.
std::string AbslUnparseFlag(ByteSizeFlag flag) { return tensord::FormatExactByteSize(flag.bytes); }

ABSL_FLAG(std::vector<std::string>, listen, {"127.0.0.1:50051"},
          "Address to serve gRPC on: host:port (port 0 picks one) or unix:PATH. Repeat the flag "
          "or separate with commas for several. Env: TENSORD_LISTEN.");
ABSL_FLAG(ByteSizeFlag, max_host_bytes, ByteSizeFlag{uint64_t{8} << 30},
          "Host memory all tensor versions may hold together (e.g. 8GiB); puts beyond it get "
          "RESOURCE_EXHAUSTED. Env: TENSORD_MAX_HOST_BYTES.");
ABSL_FLAG(ByteSizeFlag, max_tensor_bytes, ByteSizeFlag{uint64_t{4} << 30},
          "Largest single tensor a put may store. Env: TENSORD_MAX_TENSOR_BYTES.");
ABSL_FLAG(uint64_t, max_tensors, 1'000'000,
          "Most tensor names held at once. Env: TENSORD_MAX_TENSORS.");
ABSL_FLAG(ByteSizeFlag, chunk_bytes, ByteSizeFlag{1 << 20},
          "Data bytes per streamed fetch message. Env: TENSORD_CHUNK_BYTES.");
ABSL_FLAG(ByteSizeFlag, max_message_bytes, ByteSizeFlag{8 << 20},
          "Largest gRPC message accepted or sent; must exceed the chunk size of every client. "
          "Env: TENSORD_MAX_MESSAGE_BYTES.");
ABSL_FLAG(std::string, log_level, "info",
          "Lowest level logged: debug, info, warning, error. Env: TENSORD_LOG_LEVEL.");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "On SIGTERM/SIGINT, how long in-flight calls may run before they are cancelled. "
          "Env: TENSORD_SHUTDOWN_GRACE.");
ABSL_FLAG(std::string, preload, "",
          "A .safetensors file whose tensors are published at startup. Env: TENSORD_PRELOAD.");
ABSL_FLAG(std::string, preload_prefix, "",
          "Prefix added to the names of preloaded tensors. Env: TENSORD_PRELOAD_PREFIX.");
ABSL_FLAG(bool, huge_pages, false,
          "Back host tensors with 2 MiB huge pages (hugetlbfs memfds) when the host's pool "
          "(/proc/sys/vm/nr_hugepages) has room, normal pages otherwise. Fewer page faults for "
          "readers of large tensors. Env: TENSORD_HUGE_PAGES.");
ABSL_FLAG(ByteSizeFlag, spare_put_bytes, ByteSizeFlag{uint64_t{2} << 30},
          "Memfds of remote-put tensors of 1 MiB or more that are gone (replaced or deleted, no "
          "lease left) are kept, up to this many bytes, for the next put of the same size and "
          "access domain, which then writes into existing pages instead of new ones. Charged to "
          "--max-host-bytes and given back before any tensor is evicted; one idle for 30 s is "
          "freed; 0 keeps none. Env: TENSORD_SPARE_PUT_BYTES.");
ABSL_FLAG(ByteSizeFlag, arena_max_tensor_bytes, ByteSizeFlag{uint64_t{1} << 20},
          "Host tensors up to this size share memfd arenas (16 MiB each, slots by size class) "
          "instead of one memfd and mapping each, so live tensors are bounded by memory and "
          "--max-tensors, not by fds; 0 gives every tensor its own memfd. "
          "Env: TENSORD_ARENA_MAX_TENSOR_BYTES.");
ABSL_FLAG(std::string, handoff_socket, "auto",
          "Unix socket for zero-copy local handoff (memfd + SCM_RIGHTS), created mode 0660. "
          "auto: $XDG_RUNTIME_DIR/tensord/handoff-PID.sock, or /tmp/tensord-UID/ when there is "
          "no runtime directory (private to this user; clients find it through GetServerInfo). "
          "off (or empty) turns local handoff off. Env: TENSORD_HANDOFF_SOCKET.");
ABSL_FLAG(std::vector<std::string>, handoff_allow_uid, {},
          "Peer uids allowed on the handoff socket (comma-separated); default: the server's own "
          "uid. Others need a token from IssueHandoffToken. Env: TENSORD_HANDOFF_ALLOW_UID.");
ABSL_FLAG(std::vector<std::string>, handoff_allow_gid, {},
          "Peer gids allowed on the handoff socket (comma-separated). "
          "Env: TENSORD_HANDOFF_ALLOW_GID.");
ABSL_FLAG(absl::Duration, create_timeout, absl::Seconds(60),
          "A local create not sealed within this long is reclaimed and publishes nothing. "
          "Env: TENSORD_CREATE_TIMEOUT.");
ABSL_FLAG(uint64_t, max_leases_per_client, 65536,
          "Most leases one handoff connection may hold. Env: TENSORD_MAX_LEASES_PER_CLIENT.");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port to serve Prometheus metrics on (GET /metrics, plain HTTP); empty (the "
          "default) turns metrics off. Env: TENSORD_METRICS_LISTEN.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: serve TLS on the TCP listeners (Unix sockets stay plaintext). "
          "Needs --tls-key. Env: TENSORD_TLS_CERT.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert. Env: TENSORD_TLS_KEY.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: require every TLS client to present a certificate it signed (mutual "
          "TLS). Env: TENSORD_TLS_CLIENT_CA.");
ABSL_FLAG(bool, allow_insecure_remote, false,
          "Serve plaintext gRPC on addresses other hosts can reach (not loopback, not unix:); "
          "refused without TLS otherwise. Env: TENSORD_ALLOW_INSECURE_REMOTE.");
ABSL_FLAG(std::string, tokens_file, "",
          "Bearer tokens allowed to call, one per line '<token|sha256:HEX> <read,write,admin> "
          "[name-prefix]'; empty turns auth off (sensible only on loopback or Unix sockets). "
          "Env: TENSORD_TOKENS_FILE.");
ABSL_FLAG(int64_t, max_concurrent_streams, 256,
          "Most Put and Fetch streams open at once, server-wide; more get RESOURCE_EXHAUSTED. "
          "0 = no limit. Env: TENSORD_MAX_CONCURRENT_STREAMS.");
ABSL_FLAG(absl::Duration, stream_idle_timeout, absl::Seconds(60),
          "A Put whose client sends nothing, or a Fetch whose client reads nothing, for this long "
          "is cancelled, freeing its memory; 'inf' = never. Env: TENSORD_STREAM_IDLE_TIMEOUT.");
ABSL_FLAG(uint64_t, max_watches, 1024,
          "Most Watch calls open at once, server-wide; more get RESOURCE_EXHAUSTED. "
          "Env: TENSORD_MAX_WATCHES.");
ABSL_FLAG(uint64_t, watch_history, 65536,
          "Items of recent changes (publishes, deletes, evictions) kept for watchers; a watcher "
          "further behind is told which versions it may have missed. Env: TENSORD_WATCH_HISTORY.");
ABSL_FLAG(uint64_t, max_connections, 0,
          "Most gRPC connections open at once (all listeners); more are closed as soon as "
          "accepted, counted in tensord_connections_refused_total, while established clients "
          "keep being served. 0 = half of the open-file limit (RLIMIT_NOFILE, raised to its hard "
          "limit at start), leaving 3/8 of it for tensors (one fd each), snapshots and gRPC. "
          "Env: TENSORD_MAX_CONNECTIONS.");
ABSL_FLAG(uint64_t, max_handoff_connections, 0,
          "Most handoff-socket connections open at once; more are closed as soon as accepted. "
          "0 = an eighth of the open-file limit. Env: TENSORD_MAX_HANDOFF_CONNECTIONS.");
ABSL_FLAG(absl::Duration, handshake_timeout, absl::Seconds(5),
          "A connection that has not finished its TLS handshake and HTTP/2 preface within this "
          "is closed. Env: TENSORD_HANDSHAKE_TIMEOUT.");
ABSL_FLAG(absl::Duration, connection_idle_timeout, tensord::ConnectionLimits().idle_timeout,
          "A gRPC connection with no call for this long is closed (clients reconnect on their "
          "next call; they should close idle connections sooner themselves: "
          "docs/operations.md); 0 = never. Env: TENSORD_CONNECTION_IDLE_TIMEOUT.");
ABSL_FLAG(std::string, ready_file, "",
          "Once serving, write the bound addresses here, one per line (written to a temporary "
          "file and renamed, so its appearance means ready). Env: TENSORD_READY_FILE.");
ABSL_FLAG(std::string, snapshot_dir, "",
          "Directory for snapshots of the durable tensors (retention default or pinned): "
          "restored at start before serving, written on SIGTERM/SIGINT and on the Snapshot RPC "
          "(tensorctl snapshot). Created when missing. Empty turns snapshots off. "
          "Env: TENSORD_SNAPSHOT_DIR.");
ABSL_FLAG(bool, snapshot_ignore_corrupt, false,
          "Start even when the snapshot is damaged: restore the tensors that verify and move the "
          "file aside to tensord.snapshot.corrupt. Without it a damaged snapshot stops the start. "
          "Env: TENSORD_SNAPSHOT_IGNORE_CORRUPT.");
ABSL_FLAG(double, eviction_high_watermark, 0.9,
          "Fraction of --max-host-bytes above which cache-retention tensors are evicted, least "
          "recently used and unleased first. Env: TENSORD_EVICTION_HIGH_WATERMARK.");
ABSL_FLAG(double, eviction_low_watermark, 0.8,
          "Fraction of --max-host-bytes eviction brings use down to. "
          "Env: TENSORD_EVICTION_LOW_WATERMARK.");

ABSL_FLAG(std::string, device_backend, "auto",
          "Where kDLCUDA tensors live: auto (CUDA when a GPU is found, else host tensors only), "
          "cuda (fail to start without a GPU), simulated (host memfds with CUDA's rules, for "
          "tests), none (host tensors only). Env: TENSORD_DEVICE_BACKEND.");
ABSL_FLAG(int32_t, simulated_devices, 1,
          "Devices of --device-backend=simulated (1..64). Env: TENSORD_SIMULATED_DEVICES.");
ABSL_FLAG(bool, simulated_legacy_ipc_only, false,
          "Simulated devices offer legacy IPC handles only, as CUDA drivers without VMM "
          "file-descriptor support do (tests that fallback). Env: "
          "TENSORD_SIMULATED_LEGACY_IPC_ONLY.");
ABSL_FLAG(ByteSizeFlag, max_device_bytes, ByteSizeFlag{uint64_t{8} << 30},
          "Device memory the tensor versions on each device may hold together (e.g. 8GiB); "
          "device puts beyond it get RESOURCE_EXHAUSTED. Env: TENSORD_MAX_DEVICE_BYTES.");
ABSL_FLAG(std::string, etcd_endpoints, "",
          "etcd endpoints (http[s]://host:port, comma-separated) of the cluster to join; empty "
          "(the default) runs a single node. Env: TENSORD_ETCD_ENDPOINTS.");
ABSL_FLAG(std::string, node_name, "",
          "This node's name in the cluster, unique among live nodes (letters, digits, '.', '_', "
          "'-'); default: the host name. Env: TENSORD_NODE_NAME.");
ABSL_FLAG(std::string, advertise_address, "",
          "host:port other nodes and clients reach this node's gRPC service on; default: the "
          "first TCP --listen address, refused when it is a wildcard, or loopback while an etcd "
          "endpoint is not. Env: TENSORD_ADVERTISE_ADDRESS.");
ABSL_FLAG(absl::Duration, etcd_lease_ttl, absl::Seconds(5),
          "TTL of this node's etcd lease (whole seconds): a node that stops renewing (killed, cut "
          "off) leaves the member list within it. Renewed every TTL/3. "
          "Env: TENSORD_ETCD_LEASE_TTL.");
ABSL_FLAG(std::string, etcd_prefix, "/tensord",
          "etcd key prefix of this cluster; nodes register under PREFIX/nodes/NAME. "
          "Env: TENSORD_ETCD_PREFIX.");
ABSL_FLAG(std::string, etcd_ca, "",
          "PEM CA bundle (contents or path) that signed etcd's server certificate; needs https:// "
          "endpoints. Env: TENSORD_ETCD_CA.");
ABSL_FLAG(std::string, etcd_cert, "",
          "PEM client certificate (contents or path) presented to etcd. Needs --etcd-key. "
          "Env: TENSORD_ETCD_CERT.");
ABSL_FLAG(std::string, etcd_key, "", "PEM private key of --etcd-cert. Env: TENSORD_ETCD_KEY.");
ABSL_FLAG(std::string, etcd_user, "",
          "etcd user to authenticate as (etcd with auth enabled). Needs --etcd-password-file. "
          "Env: TENSORD_ETCD_USER.");
ABSL_FLAG(std::string, etcd_password_file, "",
          "File holding --etcd-user's password (one trailing newline is ignored). "
          "Env: TENSORD_ETCD_PASSWORD_FILE.");
ABSL_FLAG(std::string, cluster_token_file, "",
          "File holding the bearer token this node presents to other nodes on node-to-node "
          "calls (pulls of a version, Replicate, cache-copy places), for clusters whose nodes "
          "run with --tokens-file; the token needs the 'cluster' permission. It is sent only "
          "over TLS: needs --cluster-ca (the start is refused otherwise). "
          "Env: TENSORD_CLUSTER_TOKEN_FILE.");
ABSL_FLAG(std::string, cluster_ca, "",
          "PEM CA bundle (contents or path) that signed the other nodes' --tls-cert: nodes then "
          "pull from each other over TLS, presenting this node's --tls-cert as client "
          "certificate (for nodes with --tls-client-ca). Env: TENSORD_CLUSTER_CA.");
ABSL_FLAG(std::string, cluster_tls_server_name, "",
          "Name the other nodes' certificates are checked against, when not the host of their "
          "--advertise-address (e.g. one name on every node's certificate). Needs --cluster-ca. "
          "Env: TENSORD_CLUSTER_TLS_SERVER_NAME.");
ABSL_FLAG(int64_t, etcd_max_txn_ops, 128,
          "Keys tensord writes in one etcd transaction (durable puts share commits up to it; an "
          "atomic group in a cluster holds at most this many items less one). Must not exceed "
          "etcd's own --max-txn-ops (128 by default). Env: TENSORD_ETCD_MAX_TXN_OPS.");
ABSL_FLAG(absl::Duration, etcd_compaction_interval, absl::Minutes(5),
          "How often etcd's history older than one interval is compacted (by the live node "
          "first by name), so it does not fill etcd's quota; 0 turns it off for an etcd that "
          "compacts itself (--auto-compaction-*). Env: TENSORD_ETCD_COMPACTION_INTERVAL.");
ABSL_FLAG(std::string, default_replicas, "",
          "Copies a put is acknowledged after when it does not ask (PutOptions::replicas 0): "
          "'N' for every name and 'PREFIX=N' for names under PREFIX, comma-separated, the "
          "longest prefix winning (e.g. 'model/=2'); 1 (this node only) otherwise. Env: "
          "TENSORD_DEFAULT_REPLICAS.");

namespace tensord {
namespace {

// The cluster flags' values; each needs --etcd-endpoints.
ClusterFlags ClusterFlagValues() {
  return ClusterFlags{.etcd_endpoints = absl::GetFlag(FLAGS_etcd_endpoints),
                      .node_name = absl::GetFlag(FLAGS_node_name),
                      .advertise_address = absl::GetFlag(FLAGS_advertise_address),
                      .lease_ttl = absl::GetFlag(FLAGS_etcd_lease_ttl),
                      .prefix = absl::GetFlag(FLAGS_etcd_prefix),
                      .ca = absl::GetFlag(FLAGS_etcd_ca),
                      .cert = absl::GetFlag(FLAGS_etcd_cert),
                      .key = absl::GetFlag(FLAGS_etcd_key),
                      .user = absl::GetFlag(FLAGS_etcd_user),
                      .password_file = absl::GetFlag(FLAGS_etcd_password_file),
                      .cluster_token_file = absl::GetFlag(FLAGS_cluster_token_file),
                      .default_replicas = absl::GetFlag(FLAGS_default_replicas),
                      .cluster_ca = absl::GetFlag(FLAGS_cluster_ca),
                      .cluster_tls_server_name = absl::GetFlag(FLAGS_cluster_tls_server_name),
                      .etcd_max_txn_ops = absl::GetFlag(FLAGS_etcd_max_txn_ops),
                      .etcd_compaction_interval = absl::GetFlag(FLAGS_etcd_compaction_interval)};
}

// Without --etcd-endpoints a cluster flag would silently do nothing:
// refuse it instead, naming it.
absl::Status CheckNoClusterFlagsWithoutEtcd(const ClusterFlags& flags) {
  const ClusterFlags defaults;
  struct Given {
    const char* flag;
    bool set;
  };
  for (const Given& given :
       {Given{"--node-name", !flags.node_name.empty()},
        Given{"--advertise-address", !flags.advertise_address.empty()},
        Given{"--etcd-lease-ttl", flags.lease_ttl != defaults.lease_ttl},
        Given{"--etcd-prefix", flags.prefix != defaults.prefix},
        Given{"--etcd-ca", !flags.ca.empty()}, Given{"--etcd-cert", !flags.cert.empty()},
        Given{"--etcd-key", !flags.key.empty()}, Given{"--etcd-user", !flags.user.empty()},
        Given{"--etcd-password-file", !flags.password_file.empty()},
        Given{"--cluster-token-file", !flags.cluster_token_file.empty()},
        Given{"--default-replicas", !flags.default_replicas.empty()},
        Given{"--cluster-ca", !flags.cluster_ca.empty()},
        Given{"--cluster-tls-server-name", !flags.cluster_tls_server_name.empty()},
        Given{"--etcd-max-txn-ops", flags.etcd_max_txn_ops != defaults.etcd_max_txn_ops},
        Given{"--etcd-compaction-interval",
              flags.etcd_compaction_interval != defaults.etcd_compaction_interval}}) {
    if (given.set) {
      return absl::InvalidArgumentError(absl::StrCat(
          given.flag, " is set but --etcd-endpoints is not: cluster flags need a cluster to join"));
    }
  }
  return absl::OkStatus();
}

// Takes the cluster node away from the server and stops it, however Run
// returns: after the server drained on a normal stop, so no call is in it.
struct ClusterNodeOnExit {
  std::shared_ptr<DeferredCluster> deferred;
  std::shared_ptr<ClusterNode> node;
  ~ClusterNodeOnExit() {
    if (node != nullptr) node->Leave();
    if (deferred != nullptr) deferred->Set(nullptr);
    node.reset();
  }
};

// Every flag may come from TENSORD_<FLAG_NAME>, unless the command line gives
// it: a flag on the command line replaces its variable. Coming first would
// not be enough, since --listen gathers every occurrence (an image's own
// TENSORD_LISTEN would be served beside the user's --listen).
std::vector<std::string> ArgumentsFromEnvironment(std::span<char* const> command_line) {
  std::vector<std::string> arguments;
  for (const FlagGroup& group : ServerFlagGroups()) {
    for (std::string_view flag : group.flags) {
      if (CommandLineGivesFlag(command_line, flag)) continue;
      std::string variable = absl::StrCat("TENSORD_", absl::AsciiStrToUpper(AsAbsl(flag)));
      if (const char* value = std::getenv(variable.c_str()); value != nullptr) {
        arguments.push_back(absl::StrCat("--", AsAbsl(flag), "=", value));
      }
    }
  }
  return arguments;
}

// absl flags keep only the last value of a repeated flag; --listen
// accumulates, so its occurrences are gathered here and removed from argv.
std::vector<std::string> TakeListenAddresses(std::vector<std::string>& arguments) {
  std::vector<std::string> addresses;
  std::vector<std::string> rest;
  for (size_t i = 0; i < arguments.size(); ++i) {
    absl::string_view argument = arguments[i];
    absl::string_view value;
    if (absl::ConsumePrefix(&argument, "--listen=") || absl::ConsumePrefix(&argument, "-listen=")) {
      value = argument;
    } else if ((argument == "--listen" || argument == "-listen") && i + 1 < arguments.size()) {
      value = arguments[++i];
    } else {
      rest.push_back(arguments[i]);
      continue;
    }
    for (absl::string_view address : absl::StrSplit(value, ',', absl::SkipEmpty())) {
      addresses.emplace_back(address);
    }
  }
  arguments = std::move(rest);
  return addresses;
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

// TLS material, tokens and stream limits from their flags.
absl::Status ApplySecurityFlags(ServerOptions& options) {
  struct PemFlag {
    const char* flag;
    std::string value;
    std::string* out;
  };
  for (const PemFlag& pem :
       {PemFlag{"--tls-cert", absl::GetFlag(FLAGS_tls_cert), &options.tls.cert_chain_pem},
        PemFlag{"--tls-key", absl::GetFlag(FLAGS_tls_key), &options.tls.private_key_pem},
        PemFlag{"--tls-client-ca", absl::GetFlag(FLAGS_tls_client_ca),
                &options.tls.client_ca_pem}}) {
    absl::StatusOr<std::string> contents = PemFromPathOrContents(pem.value, pem.flag);
    if (!contents.ok()) return contents.status();
    *pem.out = std::move(*contents);
  }
  options.allow_insecure_remote = absl::GetFlag(FLAGS_allow_insecure_remote);
  if (std::string path = absl::GetFlag(FLAGS_tokens_file); !path.empty()) {
    absl::StatusOr<std::vector<TokenGrant>> grants = LoadTokenFile(path);
    if (!grants.ok()) return grants.status();
    options.token_grants = std::move(*grants);
  }
  const int64_t max_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  const absl::Duration idle_timeout = absl::GetFlag(FLAGS_stream_idle_timeout);
  if (max_streams < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-concurrent-streams ", max_streams, " is negative"));
  }
  if (idle_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--stream-idle-timeout ", absl::FormatDuration(idle_timeout), " must be positive"));
  }
  options.stream_limits.max_streams = max_streams;
  options.stream_limits.idle_timeout = idle_timeout;
  return absl::OkStatus();
}

int Run(int argc, char** argv) {
  // Before gRPC's first TLS credentials initialise OpenSSL.
  if (absl::Status kept = KeepOpenSslThroughExit(); !kept.ok()) {
    Log(LogLevel::kWarning, "openssl_init_failed", {{"error", kept.ToString()}});
  }
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "server/main.cc");
  };
  usage_config.normalize_filename = [](absl::string_view path) { return std::string(path); };
  absl::SetFlagsUsageConfig(usage_config);
  absl::SetProgramUsageMessage(
      "tensord serves named tensors over gRPC.\n"
      "Usage: tensord [--listen=127.0.0.1:50051] [--max-host-bytes=8GiB] [flags]");
  std::vector<std::string> arguments = {argv[0]};
  for (std::string& argument :
       ArgumentsFromEnvironment(std::span<char* const>(argv, argc).subspan(argc > 0 ? 1 : 0))) {
    arguments.push_back(std::move(argument));
  }
  for (int i = 1; i < argc; ++i) arguments.push_back(argv[i]);
  // absl spells flags with underscores; accept the dashed spelling too.
  for (size_t i = 1; i < arguments.size(); ++i) {
    std::string& argument = arguments[i];
    if (argument == "--") break;
    if (argument.size() < 2 || argument[0] != '-') continue;
    const size_t prefix = argument[1] == '-' ? 2 : 1;
    const size_t end = std::min(argument.find('='), argument.size());
    std::replace(argument.begin() + prefix, argument.begin() + end, '-', '_');
  }
  CommandLineRequest request;
  const absl::Status checked = CheckServerArguments(std::span(arguments).subspan(1), request);
  if (request == CommandLineRequest::kHelp) {
    std::fputs(ServerHelpText().c_str(), stdout);
    return 0;
  }
  if (request == CommandLineRequest::kVersion) {
    std::printf("%s\n", VersionLine("tensord").c_str());
    return 0;
  }
  if (!checked.ok()) {
    std::fprintf(stderr, "tensord: %s\nRun 'tensord --help' for the flags.\n",
                 std::string(checked.message()).c_str());
    return 2;
  }
  std::vector<std::string> listen = TakeListenAddresses(arguments);
  std::vector<char*> raw_arguments;
  for (std::string& argument : arguments) raw_arguments.push_back(argument.data());
  absl::ParseCommandLine(static_cast<int>(raw_arguments.size()), raw_arguments.data());
  if (listen.empty()) listen = absl::GetFlag(FLAGS_listen);
  // Freed gRPC receive buffers stay for the next put; the service hands
  // them back once puts stop (IdleHeapTrim).
  KeepFreedHeapForTransfers();

  absl::StatusOr<LogLevel> level = ParseLogLevel(absl::GetFlag(FLAGS_log_level));
  if (!level.ok()) {
    std::fprintf(stderr, "tensord: --log-level: %s\n",
                 std::string(level.status().message()).c_str());
    return 2;
  }
  SetMinLogLevel(*level);

  ServerOptions options;
  options.listen_addresses = listen;
  options.registry.max_host_bytes = absl::GetFlag(FLAGS_max_host_bytes).bytes;
  options.registry.max_tensors = absl::GetFlag(FLAGS_max_tensors);
  options.max_watches = absl::GetFlag(FLAGS_max_watches);
  options.registry.watch_history_items = absl::GetFlag(FLAGS_watch_history);
  if (options.max_watches == 0 || options.registry.watch_history_items == 0) {
    std::fprintf(stderr,
                 "tensord: --max-watches %llu and --watch-history %llu must be at least 1\n",
                 static_cast<unsigned long long>(options.max_watches),
                 static_cast<unsigned long long>(options.registry.watch_history_items));
    return 2;
  }
  options.registry.page_policy =
      absl::GetFlag(FLAGS_huge_pages) ? PagePolicy::kHugeWhenAvailable : PagePolicy::kNormal;
  options.registry.arenas.max_slot_bytes = absl::GetFlag(FLAGS_arena_max_tensor_bytes).bytes;
  options.registry.spare_buffers.max_bytes = absl::GetFlag(FLAGS_spare_put_bytes).bytes;
  if (options.registry.arenas.max_slot_bytes > (uint64_t{64} << 20)) {
    std::fprintf(stderr,
                 "tensord: --arena-max-tensor-bytes (%lu) must be at most 64MiB: larger "
                 "tensors gain nothing from sharing a memfd\n",
                 options.registry.arenas.max_slot_bytes);
    return 2;
  }
  options.max_tensor_bytes = absl::GetFlag(FLAGS_max_tensor_bytes).bytes;
  uint64_t chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes).bytes;
  uint64_t max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes).bytes;
  if (max_message_bytes > (uint64_t{1} << 30) || chunk_bytes > max_message_bytes) {
    std::fprintf(stderr,
                 "tensord: --chunk-bytes (%lu) must not exceed --max-message-bytes (%lu), "
                 "which must be at most 1GiB\n",
                 chunk_bytes, max_message_bytes);
    return 2;
  }
  options.chunk_bytes = static_cast<uint32_t>(chunk_bytes);
  options.max_message_bytes = static_cast<uint32_t>(max_message_bytes);
  options.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  // Removes the directory made for an "auto" socket once the server (and
  // with it the socket) is gone, however Run returns.
  struct DirectoryRemover {
    std::string path;
    ~DirectoryRemover() {
      if (!path.empty()) ::rmdir(path.c_str());
    }
  } handoff_directory;
  if (std::string socket = absl::GetFlag(FLAGS_handoff_socket); socket == "auto") {
    absl::StatusOr<HandoffSocketPath> chosen = DefaultHandoffSocketPath();
    if (!chosen.ok()) {
      std::fprintf(stderr, "tensord: --handoff-socket=auto: %s; give a path, or off\n",
                   std::string(chosen.status().message()).c_str());
      return 1;
    }
    options.handoff.socket_path = chosen->path;
    handoff_directory.path = chosen->private_directory;
  } else if (socket != "off") {
    options.handoff.socket_path = std::move(socket);  // empty: off
  }
  for (const std::string& text : absl::GetFlag(FLAGS_handoff_allow_uid)) {
    uint32_t id = 0;
    if (!absl::SimpleAtoi(text, &id)) {
      std::fprintf(stderr, "tensord: --handoff-allow-uid: '%s' is not a uid\n", text.c_str());
      return 2;
    }
    options.handoff.allowed_uids.push_back(id);
  }
  for (const std::string& text : absl::GetFlag(FLAGS_handoff_allow_gid)) {
    uint32_t id = 0;
    if (!absl::SimpleAtoi(text, &id)) {
      std::fprintf(stderr, "tensord: --handoff-allow-gid: '%s' is not a gid\n", text.c_str());
      return 2;
    }
    options.handoff.allowed_gids.push_back(id);
  }
  options.registry.eviction_high_watermark = absl::GetFlag(FLAGS_eviction_high_watermark);
  options.registry.eviction_low_watermark = absl::GetFlag(FLAGS_eviction_low_watermark);
  if (!(options.registry.eviction_low_watermark > 0 &&
        options.registry.eviction_low_watermark <= options.registry.eviction_high_watermark &&
        options.registry.eviction_high_watermark <= 1)) {
    std::fprintf(stderr,
                 "tensord: need 0 < --eviction-low-watermark (%g) <= "
                 "--eviction-high-watermark (%g) <= 1\n",
                 options.registry.eviction_low_watermark, options.registry.eviction_high_watermark);
    return 2;
  }
  options.snapshot_dir = absl::GetFlag(FLAGS_snapshot_dir);
  options.corrupt_snapshot = absl::GetFlag(FLAGS_snapshot_ignore_corrupt)
                                 ? CorruptSnapshotPolicy::kLoadValid
                                 : CorruptSnapshotPolicy::kRefuse;
  if (!options.snapshot_dir.empty() && ::mkdir(options.snapshot_dir.c_str(), 0700) != 0 &&
      errno != EEXIST) {
    std::fprintf(stderr, "tensord: --snapshot-dir %s: %s\n", options.snapshot_dir.c_str(),
                 std::strerror(errno));
    return 2;
  }
  options.connections.max_connections = absl::GetFlag(FLAGS_max_connections);
  options.handoff.max_connections = absl::GetFlag(FLAGS_max_handoff_connections);
  options.connections.handshake_timeout = absl::GetFlag(FLAGS_handshake_timeout);
  options.connections.idle_timeout = absl::GetFlag(FLAGS_connection_idle_timeout);
  if (options.connections.handshake_timeout <= absl::ZeroDuration()) {
    std::fprintf(stderr, "tensord: --handshake-timeout %s must be positive\n",
                 absl::FormatDuration(options.connections.handshake_timeout).c_str());
    return 2;
  }
  if (options.connections.idle_timeout < absl::ZeroDuration()) {
    std::fprintf(stderr, "tensord: --connection-idle-timeout %s must not be negative\n",
                 absl::FormatDuration(options.connections.idle_timeout).c_str());
    return 2;
  }
  options.handoff.limits.max_tensor_bytes = options.max_tensor_bytes;
  options.handoff.limits.create_timeout = absl::GetFlag(FLAGS_create_timeout);
  options.handoff.limits.max_leases_per_connection = absl::GetFlag(FLAGS_max_leases_per_client);

  if (absl::Status status = ApplySecurityFlags(options); !status.ok()) {
    std::fprintf(stderr, "tensord: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  options.registry.max_device_bytes = absl::GetFlag(FLAGS_max_device_bytes).bytes;
  absl::StatusOr<std::shared_ptr<DeviceBackend>> device_backend = SelectDeviceBackend(
      DeviceSelection{.backend = absl::GetFlag(FLAGS_device_backend),
                      .simulated_devices = absl::GetFlag(FLAGS_simulated_devices),
                      .simulated_legacy_ipc_only = absl::GetFlag(FLAGS_simulated_legacy_ipc_only),
                      .max_device_bytes = options.registry.max_device_bytes});
  if (!device_backend.ok()) {
    std::fprintf(stderr, "tensord: %s\n", std::string(device_backend.status().message()).c_str());
    return device_backend.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  options.registry.device_backend = std::move(*device_backend);

  const ClusterFlags cluster_flags = ClusterFlagValues();
  std::optional<ClusterConfig> cluster_config;
  std::shared_ptr<EtcdClient> etcd_client;
  // The server reads the cluster through this; the node is set once it joined.
  std::shared_ptr<DeferredCluster> cluster;
  if (cluster_flags.etcd_endpoints.empty()) {
    if (absl::Status status = CheckNoClusterFlagsWithoutEtcd(cluster_flags); !status.ok()) {
      std::fprintf(stderr, "tensord: %s\n", std::string(status.message()).c_str());
      return 2;
    }
  } else {
    absl::StatusOr<ClusterConfig> config = ClusterConfigFromFlags(cluster_flags);
    absl::StatusOr<std::unique_ptr<EtcdClient>> etcd =
        config.ok() ? EtcdClient::Create(config->etcd) : config.status();
    if (!etcd.ok()) {
      std::fprintf(stderr, "tensord: %s\n", std::string(etcd.status().message()).c_str());
      return 2;
    }
    cluster_config = std::move(*config);
    etcd_client = std::move(*etcd);
    cluster = std::make_shared<DeferredCluster>(cluster_config->membership.node_name);
    options.cluster = cluster;
    options.cluster_access = cluster;
  }

  // gRPC uses absl::Mutex; Debian's Abseil keeps deadlock detection on,
  // which shows in every call's profile.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // Every version is a memfd: allow as many fds as the hard limit does.
  if (rlimit limit{}; getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }

  // Signals are taken by sigwait below; block them before gRPC starts threads
  // so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<TensorServer>> server = TensorServer::Start(options);
  if (!server.ok()) {
    Log(LogLevel::kError, "start_failed", {{"error", server.status().ToString()}});
    return 1;
  }
  if (std::string preload = absl::GetFlag(FLAGS_preload); !preload.empty()) {
    absl::StatusOr<uint64_t> loaded =
        PreloadSafetensors((*server)->registry(), preload, absl::GetFlag(FLAGS_preload_prefix));
    if (!loaded.ok()) {
      Log(LogLevel::kError, "preload_failed",
          {{"file", preload}, {"error", loaded.status().ToString()}});
      return 1;
    }
  }
  ClusterNodeOnExit cluster_node;
  if (cluster != nullptr) {
    absl::StatusOr<std::string> advertise =
        ChooseAdvertiseAddress(cluster_flags.advertise_address, (*server)->bound_addresses(),
                               cluster_config->etcd.endpoints);
    if (!advertise.ok()) {
      std::fprintf(stderr, "tensord: %s\n", std::string(advertise.status().message()).c_str());
      return 2;
    }
    ClusterNodeOptions node_options{
        .membership = cluster_config->membership,
        .replica_rules = cluster_config->replica_rules,
        .max_txn_ops = cluster_config->max_txn_ops,
        .compaction_interval = cluster_config->compaction_interval,
        .peers =
            PeerChannelOptions{.bearer_token = cluster_config->peer_token,
                               .peer_ca_pem = cluster_config->peer_ca_pem,
                               .peer_tls_server_name = cluster_config->peer_tls_server_name,
                               .client_cert_pem = options.tls.cert_chain_pem,
                               .client_key_pem = options.tls.private_key_pem,
                               .max_message_bytes = static_cast<int>(
                                   std::max<uint32_t>(options.max_message_bytes, 64 << 20)),
                               .idle_timeout = PeerIdleTimeout(options.connections.idle_timeout)},
        .watch_history_items = options.registry.watch_history_items};
    node_options.self.advertise_address = *advertise;
    node_options.self.handoff_available = !options.handoff.socket_path.empty();
    node_options.self.server_version = std::string(ReleaseVersion());
    node_options.self.start_time_unix_ms = absl::ToUnixMillis(absl::Now());
    absl::StatusOr<std::unique_ptr<ClusterNode>> joined =
        ClusterNode::Join(etcd_client, (*server)->registry(), std::move(node_options));
    if (!joined.ok()) {
      Log(LogLevel::kError, "cluster_join_failed",
          {{"node", cluster_config->membership.node_name},
           {"etcd", absl::StrJoin(cluster_config->etcd.endpoints, ",")},
           {"error", joined.status().ToString()}});
      return 1;
    }
    cluster_node.deferred = cluster;
    cluster_node.node = std::move(*joined);
    cluster->Set(cluster_node.node);
  }
  std::unique_ptr<MetricsExporter> metrics;
  if (std::string address = absl::GetFlag(FLAGS_metrics_listen); !address.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsExporter>> started =
        MetricsExporter::Start(address, **server);
    if (!started.ok()) {
      Log(LogLevel::kError, "metrics_failed", {{"error", started.status().ToString()}});
      return 1;
    }
    metrics = std::move(*started);
    Log(LogLevel::kInfo, "metrics_serving",
        {{"address", metrics->bound_address()}, {"path", "/metrics"}});
  }
  Log(LogLevel::kInfo, "serving",
      {{"addresses", absl::StrJoin((*server)->bound_addresses(), ",")},
       {"handoff_socket", options.handoff.socket_path},
       {"max_host_bytes", options.registry.max_host_bytes},
       {"max_connections", (*server)->listener().max_connections()},
       {"open_file_limit", OpenFileLimit()},
       {"device_backend", options.registry.device_backend == nullptr
                              ? std::string("none")
                              : absl::StrCat(options.registry.device_backend->name(), " x",
                                             options.registry.device_backend->device_count())},
       {"tls",
        options.tls.enabled() ? (options.tls.client_ca_pem.empty() ? "on" : "mutual") : "off"},
       {"auth", options.token_grants.empty() ? "off" : "tokens"},
       {"cluster",
        cluster == nullptr ? std::string("off") : absl::StrCat("node ", cluster->node_name())},
       {"pid", getpid()}});
  if (std::string ready_file = absl::GetFlag(FLAGS_ready_file); !ready_file.empty()) {
    if (absl::Status status = WriteReadyFile(ready_file, (*server)->bound_addresses());
        !status.ok()) {
      Log(LogLevel::kError, "ready_file_failed", {{"error", status.ToString()}});
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
  if (cluster_node.node != nullptr) cluster_node.node->Leave();
  (*server)->Shutdown(options.shutdown_grace);
  (*server)->Wait();
  // Nothing calls into the cluster node now: its threads stop here.
  if (cluster != nullptr) cluster->Set(nullptr);
  cluster_node.node.reset();
  // After Wait: every put that was acknowledged is in the registry, and no
  // call can publish while the snapshot is written.
  int exit_code = 0;
  if (SnapshotStore* snapshots = (*server)->snapshots(); snapshots != nullptr) {
    if (absl::StatusOr<SnapshotSummary> written = snapshots->Write((*server)->registry());
        !written.ok()) {
      Log(LogLevel::kError, "shutdown_snapshot_failed", {{"error", written.status().ToString()}});
      exit_code = 1;
    }
  }
  Log(LogLevel::kInfo, "stopped");
  return exit_code;
}

}  // namespace
}  // namespace tensord

int main(int argc, char** argv) { return tensord::Run(argc, argv); }
