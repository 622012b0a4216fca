// tensord's flags, and OptionsFromFlags: their values checked and turned
// into a TensordConfig. Each flag also comes from TENSORD_<NAME>
// (command_line.cc); each sits in one --help group there.
#include "server/server_flags.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/common/byte_size.h"
#include "service/common/pem_source.h"
#include "service/common/status_macros.h"
#include "service/security/token_file.h"
#include "service/transport/connection_listener.h"

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
          "or separate with commas for several.");
ABSL_FLAG(ByteSizeFlag, max_host_bytes, ByteSizeFlag{uint64_t{8} << 30},
          "Host memory all tensor versions may hold together (e.g. 8GiB); puts beyond it get "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(ByteSizeFlag, max_tensor_bytes, ByteSizeFlag{uint64_t{4} << 30},
          "Largest single tensor a put may store.");
ABSL_FLAG(uint64_t, max_tensors, 1'000'000, "Most tensor names held at once.");
ABSL_FLAG(ByteSizeFlag, chunk_bytes, ByteSizeFlag{1 << 20},
          "Data bytes per streamed fetch message.");
ABSL_FLAG(ByteSizeFlag, max_message_bytes, ByteSizeFlag{8 << 20},
          "Largest gRPC message accepted or sent; must exceed the chunk size of every client.");
ABSL_FLAG(std::string, log_level, "info", "Lowest level logged: debug, info, warning, error.");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "On SIGTERM/SIGINT, how long in-flight calls may run before they are cancelled.");
ABSL_FLAG(std::string, preload, "", "A .safetensors file whose tensors are published at startup.");
ABSL_FLAG(std::string, preload_prefix, "", "Prefix added to the names of preloaded tensors.");
ABSL_FLAG(bool, huge_pages, false,
          "Back host tensors with 2 MiB huge pages (hugetlbfs memfds) when the host's pool "
          "(/proc/sys/vm/nr_hugepages) has room, normal pages otherwise. Fewer page faults for "
          "readers of large tensors.");
ABSL_FLAG(ByteSizeFlag, spare_put_bytes, ByteSizeFlag{uint64_t{2} << 30},
          "Memfds of remote-put tensors of 1 MiB or more that are gone (replaced or deleted, no "
          "lease left) are kept, up to this many bytes, for the next put of the same size and "
          "access domain, which then writes into existing pages instead of new ones. Charged to "
          "--max-host-bytes and given back before any tensor is evicted; one idle for 30 s is "
          "freed; 0 keeps none.");
ABSL_FLAG(ByteSizeFlag, arena_max_tensor_bytes, ByteSizeFlag{uint64_t{1} << 20},
          "Host tensors up to this size share memfd arenas (16 MiB each, slots by size class) "
          "instead of one memfd and mapping each, so live tensors are bounded by memory and "
          "--max-tensors, not by fds; 0 gives every tensor its own memfd.");
ABSL_FLAG(std::string, handoff_socket, "auto",
          "Unix socket for zero-copy local handoff (memfd + SCM_RIGHTS), created mode 0660. "
          "auto: $XDG_RUNTIME_DIR/tensord/handoff-PID.sock, or /tmp/tensord-UID/ when there is "
          "no runtime directory (private to this user; clients find it through GetServerInfo). "
          "off (or empty) turns local handoff off.");
ABSL_FLAG(std::vector<std::string>, handoff_allow_uid, {},
          "Peer uids allowed on the handoff socket (comma-separated); default: the server's own "
          "uid. Others need a token from IssueHandoffToken.");
ABSL_FLAG(std::vector<std::string>, handoff_allow_gid, {},
          "Peer gids allowed on the handoff socket (comma-separated).");
ABSL_FLAG(absl::Duration, create_timeout, absl::Seconds(60),
          "A local create not sealed within this long is reclaimed and publishes nothing.");
ABSL_FLAG(uint64_t, max_leases_per_client, 65536, "Most leases one handoff connection may hold.");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port to serve Prometheus metrics on (GET /metrics, plain HTTP); empty (the "
          "default) turns metrics off.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: serve TLS on the TCP listeners (Unix sockets stay plaintext). "
          "Needs --tls-key.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: require every TLS client to present a certificate it signed (mutual "
          "TLS).");
ABSL_FLAG(bool, allow_insecure_remote, false,
          "Serve plaintext gRPC on addresses other hosts can reach (not loopback, not unix:); "
          "refused without TLS otherwise.");
ABSL_FLAG(std::string, tokens_file, "",
          "Bearer tokens allowed to call, one per line '<token|sha256:HEX> <read,write,admin> "
          "[name-prefix]'; empty turns auth off (sensible only on loopback or Unix sockets).");
ABSL_FLAG(int64_t, max_concurrent_streams, 256,
          "Most Put and Fetch streams open at once, server-wide; more get RESOURCE_EXHAUSTED. "
          "0 = no limit.");
ABSL_FLAG(absl::Duration, stream_idle_timeout, absl::Seconds(60),
          "A Put whose client sends nothing, or a Fetch whose client reads nothing, for this long "
          "is cancelled, freeing its memory; 'inf' = never.");
ABSL_FLAG(uint64_t, max_watches, 1024,
          "Most Watch calls open at once, server-wide; more get RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint64_t, watch_history, 65536,
          "Items of recent changes (publishes, deletes, evictions) kept for watchers; a watcher "
          "further behind is told which versions it may have missed.");
ABSL_FLAG(uint64_t, max_connections, 0,
          "Most gRPC connections open at once (all listeners); more are closed as soon as "
          "accepted, counted in tensord_connections_refused_total, while established clients "
          "keep being served. 0 = half of the open-file limit (RLIMIT_NOFILE, raised to its hard "
          "limit at start), leaving 3/8 of it for tensors (one fd each), snapshots and gRPC.");
ABSL_FLAG(uint64_t, max_handoff_connections, 0,
          "Most handoff-socket connections open at once; more are closed as soon as accepted. "
          "0 = an eighth of the open-file limit.");
ABSL_FLAG(absl::Duration, handshake_timeout, absl::Seconds(5),
          "A connection that has not finished its TLS handshake and HTTP/2 preface within this "
          "is closed.");
ABSL_FLAG(absl::Duration, connection_idle_timeout, tensord::ConnectionLimits().idle_timeout,
          "A gRPC connection with no call for this long is closed (clients reconnect on their "
          "next call; they should close idle connections sooner themselves: "
          "docs/operations.md); 0 = never.");
ABSL_FLAG(std::string, ready_file, "",
          "Once serving, write the bound addresses here, one per line (written to a temporary "
          "file and renamed, so its appearance means ready).");
ABSL_FLAG(std::string, snapshot_dir, "",
          "Directory for snapshots of the durable tensors (retention default or pinned): "
          "restored at start before serving, written on SIGTERM/SIGINT and on the Snapshot RPC "
          "(tensorctl snapshot). Created when missing. Empty turns snapshots off.");
ABSL_FLAG(bool, snapshot_ignore_corrupt, false,
          "Start even when the snapshot is damaged: restore the tensors that verify and move the "
          "file aside to tensord.snapshot.corrupt. Without it a damaged snapshot stops the start.");
ABSL_FLAG(double, eviction_high_watermark, 0.9,
          "Fraction of --max-host-bytes above which cache-retention tensors are evicted, least "
          "recently used and unleased first.");
ABSL_FLAG(double, eviction_low_watermark, 0.8,
          "Fraction of --max-host-bytes eviction brings use down to.");

ABSL_FLAG(std::string, device_backend, "auto",
          "Where kDLCUDA tensors live: auto (CUDA when a GPU is found, else host tensors only), "
          "cuda (fail to start without a GPU), simulated (host memfds with CUDA's rules, for "
          "tests), none (host tensors only).");
ABSL_FLAG(int32_t, simulated_devices, 1, "Devices of --device-backend=simulated (1..64).");
ABSL_FLAG(bool, simulated_legacy_ipc_only, false,
          "Simulated devices offer legacy IPC handles only, as CUDA drivers without VMM "
          "file-descriptor support do (tests that fallback).");
ABSL_FLAG(ByteSizeFlag, max_device_bytes, ByteSizeFlag{uint64_t{8} << 30},
          "Device memory the tensor versions on each device may hold together (e.g. 8GiB); "
          "device puts beyond it get RESOURCE_EXHAUSTED.");
ABSL_FLAG(std::string, etcd_endpoints, "",
          "etcd endpoints (http[s]://host:port, comma-separated) of the cluster to join; empty "
          "(the default) runs a single node.");
ABSL_FLAG(std::string, node_name, "",
          "This node's name in the cluster, unique among live nodes (letters, digits, '.', '_', "
          "'-'); default: the host name.");
ABSL_FLAG(std::string, advertise_address, "",
          "host:port other nodes and clients reach this node's gRPC service on; default: the "
          "first TCP --listen address, refused when it is a wildcard, or loopback while an etcd "
          "endpoint is not.");
ABSL_FLAG(absl::Duration, etcd_lease_ttl, absl::Seconds(5),
          "TTL of this node's etcd lease (whole seconds): a node that stops renewing (killed, cut "
          "off) leaves the member list within it. Renewed every TTL/3.");
ABSL_FLAG(std::string, etcd_prefix, "/tensord",
          "etcd key prefix of this cluster; nodes register under PREFIX/nodes/NAME.");
ABSL_FLAG(std::string, etcd_ca, "",
          "PEM CA bundle (contents or path) that signed etcd's server certificate; needs https:// "
          "endpoints.");
ABSL_FLAG(std::string, etcd_cert, "",
          "PEM client certificate (contents or path) presented to etcd. Needs --etcd-key.");
ABSL_FLAG(std::string, etcd_key, "", "PEM private key of --etcd-cert.");
ABSL_FLAG(std::string, etcd_user, "",
          "etcd user to authenticate as (etcd with auth enabled). Needs --etcd-password-file.");
ABSL_FLAG(std::string, etcd_password_file, "",
          "File holding --etcd-user's password (one trailing newline is ignored).");
ABSL_FLAG(std::string, cluster_token_file, "",
          "File holding the bearer token this node presents to other nodes on node-to-node "
          "calls (pulls of a version, Replicate, cache-copy places), for clusters whose nodes "
          "run with --tokens-file; the token needs the 'cluster' permission. It is sent only "
          "over TLS: needs --cluster-ca (the start is refused otherwise).");
ABSL_FLAG(std::string, cluster_ca, "",
          "PEM CA bundle (contents or path) that signed the other nodes' --tls-cert: nodes then "
          "pull from each other over TLS, presenting this node's --tls-cert as client "
          "certificate (for nodes with --tls-client-ca).");
ABSL_FLAG(std::string, cluster_tls_server_name, "",
          "Name the other nodes' certificates are checked against, when not the host of their "
          "--advertise-address (e.g. one name on every node's certificate). Needs --cluster-ca.");
ABSL_FLAG(int64_t, etcd_max_txn_ops, 128,
          "Keys tensord writes in one etcd transaction (durable puts share commits up to it; an "
          "atomic group in a cluster holds at most this many items less one). Must not exceed "
          "etcd's own --max-txn-ops (128 by default).");
ABSL_FLAG(absl::Duration, etcd_compaction_interval, absl::Minutes(5),
          "How often etcd's history older than one interval is compacted (by the live node "
          "first by name), so it does not fill etcd's quota, and the index of atomic groups is "
          "swept of groups no longer whole; 0 turns compaction off for an etcd that compacts "
          "itself (--auto-compaction-*; the sweep then runs every 5 minutes).");
ABSL_FLAG(std::string, default_replicas, "",
          "Copies a put is acknowledged after when it does not ask (PutOptions::replicas 0): "
          "'N' for every name and 'PREFIX=N' for names under PREFIX, comma-separated, the "
          "longest prefix winning (e.g. 'model/=2'); 1 (this node only) otherwise.");

namespace tensord {
namespace {

absl::Status CheckCapacity(ServerOptions& options) {
  RegistryOptions& registry = options.registry;
  registry.max_host_bytes = absl::GetFlag(FLAGS_max_host_bytes).bytes;
  registry.max_tensors = absl::GetFlag(FLAGS_max_tensors);
  options.max_watches = absl::GetFlag(FLAGS_max_watches);
  registry.watch_history_items = absl::GetFlag(FLAGS_watch_history);
  if (options.max_watches == 0 || registry.watch_history_items == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-watches ", options.max_watches, " and --watch-history ",
                     registry.watch_history_items, " must be at least 1"));
  }
  registry.page_policy =
      absl::GetFlag(FLAGS_huge_pages) ? PagePolicy::kHugeWhenAvailable : PagePolicy::kNormal;
  registry.arenas.max_slot_bytes = absl::GetFlag(FLAGS_arena_max_tensor_bytes).bytes;
  registry.spare_buffers.max_bytes = absl::GetFlag(FLAGS_spare_put_bytes).bytes;
  if (registry.arenas.max_slot_bytes > (uint64_t{64} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--arena-max-tensor-bytes (", registry.arenas.max_slot_bytes,
                     ") must be at most 64MiB: larger tensors gain nothing from sharing a memfd"));
  }
  options.max_tensor_bytes = absl::GetFlag(FLAGS_max_tensor_bytes).bytes;
  const uint64_t chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes).bytes;
  const uint64_t max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes).bytes;
  if (max_message_bytes > (uint64_t{1} << 30) || chunk_bytes > max_message_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--chunk-bytes (", chunk_bytes, ") must not exceed --max-message-bytes (",
                     max_message_bytes, "), which must be at most 1GiB"));
  }
  options.chunk_bytes = static_cast<uint32_t>(chunk_bytes);
  options.max_message_bytes = static_cast<uint32_t>(max_message_bytes);
  registry.eviction_high_watermark = absl::GetFlag(FLAGS_eviction_high_watermark);
  registry.eviction_low_watermark = absl::GetFlag(FLAGS_eviction_low_watermark);
  if (!(registry.eviction_low_watermark > 0 &&
        registry.eviction_low_watermark <= registry.eviction_high_watermark &&
        registry.eviction_high_watermark <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need 0 < --eviction-low-watermark (", registry.eviction_low_watermark,
        ") <= --eviction-high-watermark (", registry.eviction_high_watermark, ") <= 1"));
  }
  registry.max_device_bytes = absl::GetFlag(FLAGS_max_device_bytes).bytes;
  return absl::OkStatus();
}

// --handoff-allow-uid/gid: numeric ids.
absl::StatusOr<std::vector<uint32_t>> NumericIds(const char* flag,
                                                 const std::vector<std::string>& texts) {
  std::vector<uint32_t> ids;
  for (const std::string& text : texts) {
    uint32_t id = 0;
    if (!absl::SimpleAtoi(text, &id)) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": '", text, "' is not a number"));
    }
    ids.push_back(id);
  }
  return ids;
}

absl::Status CheckConnections(TensordConfig& config) {
  ServerOptions& options = config.server;
  config.handoff_socket_flag = absl::GetFlag(FLAGS_handoff_socket);
  TENSORD_ASSIGN_OR_RETURN(
      options.handoff.allowed_uids,
      NumericIds("--handoff-allow-uid", absl::GetFlag(FLAGS_handoff_allow_uid)));
  TENSORD_ASSIGN_OR_RETURN(
      options.handoff.allowed_gids,
      NumericIds("--handoff-allow-gid", absl::GetFlag(FLAGS_handoff_allow_gid)));
  options.connections.max_connections = absl::GetFlag(FLAGS_max_connections);
  options.handoff.max_connections = absl::GetFlag(FLAGS_max_handoff_connections);
  options.connections.handshake_timeout = absl::GetFlag(FLAGS_handshake_timeout);
  options.connections.idle_timeout = absl::GetFlag(FLAGS_connection_idle_timeout);
  if (options.connections.handshake_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--handshake-timeout ", absl::FormatDuration(options.connections.handshake_timeout),
        " must be positive"));
  }
  if (options.connections.idle_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--connection-idle-timeout ", absl::FormatDuration(options.connections.idle_timeout),
        " must not be negative"));
  }
  options.handoff.limits.max_tensor_bytes = options.max_tensor_bytes;
  options.handoff.limits.create_timeout = absl::GetFlag(FLAGS_create_timeout);
  options.handoff.limits.max_leases_per_connection = absl::GetFlag(FLAGS_max_leases_per_client);
  options.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  return absl::OkStatus();
}

// TLS material, tokens and stream limits.
absl::Status CheckSecurity(ServerOptions& options) {
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
    TENSORD_ASSIGN_OR_RETURN(*pem.out, PemFromPathOrContents(pem.value, pem.flag));
  }
  options.allow_insecure_remote = absl::GetFlag(FLAGS_allow_insecure_remote);
  if (std::string path = absl::GetFlag(FLAGS_tokens_file); !path.empty()) {
    TENSORD_ASSIGN_OR_RETURN(options.token_grants, LoadTokenFile(path));
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

// The cluster flags as given; ClusterConfigFromFlags checks them.
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

// Without --etcd-endpoints the cluster flags are refused by the command
// line's table (command_line.cc), so only a cluster's are read here.
absl::Status CheckCluster(TensordConfig& config) {
  const ClusterFlags flags = ClusterFlagValues();
  if (flags.etcd_endpoints.empty()) return absl::OkStatus();
  TENSORD_ASSIGN_OR_RETURN(config.cluster, ClusterConfigFromFlags(flags));
  config.advertise_address = flags.advertise_address;
  return CheckAdvertiseAddress(flags.advertise_address, config.server.listen_addresses,
                               config.cluster->etcd.endpoints);
}

}  // namespace

absl::StatusOr<TensordConfig> OptionsFromFlags() {
  TensordConfig config;
  absl::StatusOr<LogLevel> level = ParseLogLevel(absl::GetFlag(FLAGS_log_level));
  if (!level.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--log-level: ", level.status().message()));
  }
  config.log_level = *level;
  config.server.listen_addresses = absl::GetFlag(FLAGS_listen);
  TENSORD_RETURN_IF_ERROR(CheckCapacity(config.server));
  TENSORD_RETURN_IF_ERROR(CheckConnections(config));
  TENSORD_RETURN_IF_ERROR(CheckSecurity(config.server));
  config.server.snapshot_dir = absl::GetFlag(FLAGS_snapshot_dir);
  config.server.corrupt_snapshot = absl::GetFlag(FLAGS_snapshot_ignore_corrupt)
                                       ? CorruptSnapshotPolicy::kLoadValid
                                       : CorruptSnapshotPolicy::kRefuse;
  config.devices =
      DeviceSelection{.backend = absl::GetFlag(FLAGS_device_backend),
                      .simulated_devices = absl::GetFlag(FLAGS_simulated_devices),
                      .simulated_legacy_ipc_only = absl::GetFlag(FLAGS_simulated_legacy_ipc_only),
                      .max_device_bytes = config.server.registry.max_device_bytes};
  TENSORD_RETURN_IF_ERROR(CheckDeviceSelection(config.devices));
  TENSORD_RETURN_IF_ERROR(CheckCluster(config));
  config.preload = absl::GetFlag(FLAGS_preload);
  config.preload_prefix = absl::GetFlag(FLAGS_preload_prefix);
  config.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  config.ready_file = absl::GetFlag(FLAGS_ready_file);
  return config;
}

}  // namespace tensord
