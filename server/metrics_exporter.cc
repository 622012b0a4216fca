#include "server/metrics_exporter.h"

#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

#include <cmath>
#include <exception>
#include <limits>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service/common/episode_log.h"
#include "service/common/fd_limits.h"
#include "service/transport/connection_listener.h"

namespace tensord {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Registry series carry device="cpu" for host memory and device="cuda:N"
// for each device of the device backend.
constexpr char kHostDevice[] = "cpu";

ClientMetric::Label DeviceLabel() { return {"device", kHostDevice}; }
ClientMetric::Label DeviceLabel(int device) {
  return {"device", tensord::DeviceLabel(DLDevice{kDLCUDA, device})};
}

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

void AddGauge(MetricFamily& family, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  family.metric.push_back(std::move(metric));
}

void AddCounter(MetricFamily& family, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.counter.value = value;
  family.metric.push_back(std::move(metric));
}

void AddHistogram(MetricFamily& family, std::vector<ClientMetric::Label> labels,
                  const LatencySnapshot& snapshot) {
  ClientMetric metric;
  metric.label = std::move(labels);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < snapshot.counts.size(); ++i) {
    cumulative += snapshot.counts[i];
    const double bound = i < kLatencyBucketBoundsSeconds.size()
                             ? kLatencyBucketBoundsSeconds[i]
                             : std::numeric_limits<double>::infinity();
    metric.histogram.bucket.push_back({cumulative, bound});
  }
  metric.histogram.sample_count = cumulative;
  metric.histogram.sample_sum = snapshot.sum_seconds;
  family.metric.push_back(std::move(metric));
}

}  // namespace

// Builds every family from the server's state when scraped. Thread-safe: it
// only reads atomics and takes the registry's read lock.
class MetricsCollectable final : public prometheus::Collectable {
 public:
  explicit MetricsCollectable(const TensorServer& server) : server_(server) {}

  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> families;
    CollectRegistry(families);
    CollectCalls(families);
    CollectHandoff(families);
    CollectConnections(families);
    CollectCluster(families);
    return families;
  }

 private:
  void CollectRegistry(std::vector<MetricFamily>& families) const {
    const Registry& registry = server_.registry();
    const RegistryStats stats = registry.Stats();
    MetricFamily tensors = Family("tensord_tensors", "Tensor names held.", MetricType::Gauge);
    AddGauge(tensors, {DeviceLabel()}, static_cast<double>(stats.tensors));
    MetricFamily versions =
        Family("tensord_versions",
               "Versions alive: the latest of each name plus older ones readers still hold.",
               MetricType::Gauge);
    AddGauge(versions, {DeviceLabel()}, static_cast<double>(stats.versions));
    MetricFamily stored =
        Family("tensord_stored_bytes", "Bytes of the versions alive.", MetricType::Gauge);
    AddGauge(stored, {DeviceLabel()}, static_cast<double>(stats.stored_bytes));
    MetricFamily used =
        Family("tensord_capacity_used_bytes",
               "Bytes reserved against the capacity limit, including puts and creates in progress.",
               MetricType::Gauge);
    AddGauge(used, {DeviceLabel()}, static_cast<double>(registry.host_bytes_used()));
    MetricFamily limit =
        Family("tensord_capacity_limit_bytes",
               "Capacity limit (--max-host-bytes for cpu, --max-device-bytes for cuda:N).",
               MetricType::Gauge);
    AddGauge(limit, {DeviceLabel()}, static_cast<double>(registry.host_bytes_limit()));
    MetricFamily leases =
        Family("tensord_open_leases",
               "Leases open on versions: remote fetches in flight and local handoff leases.",
               MetricType::Gauge);
    AddGauge(leases, {DeviceLabel()}, static_cast<double>(stats.open_leases));
    for (int device = 0; device < static_cast<int>(stats.devices.size()); ++device) {
      const TensorCounts& counts = stats.devices[device];
      AddGauge(tensors, {DeviceLabel(device)}, static_cast<double>(counts.tensors));
      AddGauge(versions, {DeviceLabel(device)}, static_cast<double>(counts.versions));
      AddGauge(stored, {DeviceLabel(device)}, static_cast<double>(counts.stored_bytes));
      AddGauge(used, {DeviceLabel(device)},
               static_cast<double>(registry.device_bytes_used(device)));
      AddGauge(limit, {DeviceLabel(device)},
               static_cast<double>(registry.device_bytes_limit(device)));
      AddGauge(leases, {DeviceLabel(device)}, static_cast<double>(counts.open_leases));
    }
    MetricFamily evictions = Family("tensord_evictions_total",
                                    "Cache versions evicted to make room.", MetricType::Counter);
    AddCounter(evictions, {DeviceLabel()}, static_cast<double>(registry.evictions()));
    MetricFamily evicted = Family("tensord_evicted_bytes_total",
                                  "Bytes of the cache versions evicted.", MetricType::Counter);
    AddCounter(evicted, {DeviceLabel()}, static_cast<double>(registry.evicted_bytes()));
    MetricFamily arenas =
        Family("tensord_arenas",
               "Shared memfds holding small host versions (one fd and two mappings each).",
               MetricType::Gauge);
    AddGauge(arenas, {}, static_cast<double>(stats.arenas.arenas));
    MetricFamily arena_bytes =
        Family("tensord_arena_bytes",
               "Bytes of arena slots by state: used holds a version, free is kept for the next one "
               "(its pages stay allocated once touched).",
               MetricType::Gauge);
    AddGauge(arena_bytes, {{"state", "used"}}, static_cast<double>(stats.arenas.slot_bytes_used));
    AddGauge(arena_bytes, {{"state", "free"}},
             static_cast<double>(stats.arenas.arena_bytes - stats.arenas.slot_bytes_used));
    MetricFamily arena_slots =
        Family("tensord_arena_slots_used", "Arena slots holding a version.", MetricType::Gauge);
    AddGauge(arena_slots, {}, static_cast<double>(stats.arenas.slots_used));
    MetricFamily spares =
        Family("tensord_spare_put_buffers",
               "Memfds of gone remote-put versions kept for the next put of their size "
               "(--spare-put-bytes; one fd and two mappings each).",
               MetricType::Gauge);
    AddGauge(spares, {}, static_cast<double>(stats.spare_buffers.buffers));
    MetricFamily spare_bytes = Family(
        "tensord_spare_put_buffer_bytes",
        "Bytes of those memfds, charged to --max-host-bytes until a put takes or needs them.",
        MetricType::Gauge);
    AddGauge(spare_bytes, {}, static_cast<double>(stats.spare_buffers.bytes));
    MetricFamily spare_reuses =
        Family("tensord_spare_put_buffer_reuses_total",
               "Puts that wrote into a kept memfd instead of new pages.", MetricType::Counter);
    AddCounter(spare_reuses, {}, static_cast<double>(stats.spare_buffers.reuses));
    for (MetricFamily* family :
         {&tensors, &versions, &stored, &used, &limit, &leases, &evictions, &evicted, &arenas,
          &arena_bytes, &arena_slots, &spares, &spare_bytes, &spare_reuses}) {
      families.push_back(std::move(*family));
    }
  }

  // Only in cluster mode (--etcd-endpoints): a single node has no members.
  void CollectCluster(std::vector<MetricFamily>& families) const {
    const ClusterView* cluster = server_.cluster();
    if (cluster == nullptr) return;
    MetricFamily members = Family(
        "tensord_cluster_members",
        "Live cluster members (this node included) as last read from etcd.", MetricType::Gauge);
    AddGauge(members, {}, static_cast<double>(cluster->members().size()));
    MetricFamily errors = Family("tensord_etcd_errors_total",
                                 "etcd calls that failed on every endpoint.", MetricType::Counter);
    AddCounter(errors, {}, static_cast<double>(cluster->etcd_errors()));
    families.push_back(std::move(members));
    families.push_back(std::move(errors));
    const ClusterAccess* access = server_.cluster_access();
    if (access == nullptr) return;
    const ClusterStats stats = access->stats();
    for (auto [name, help, value, type] :
         {std::tuple{"tensord_cluster_pulls_total",
                     "Versions a read on this node copied from another node (the latest of a "
                     "durable name, or a cache copy); replica copies asked by a put's writer "
                     "(Replicate) are not counted.",
                     stats.pulls, MetricType::Counter},
          std::tuple{"tensord_cluster_pulled_bytes_total", "Bytes of those copies.",
                     stats.pulled_bytes, MetricType::Counter},
          std::tuple{"tensord_cluster_pull_failures_total",
                     "Pulls from one holder that failed (another holder may have served).",
                     stats.pull_failures, MetricType::Counter},
          std::tuple{"tensord_cluster_pulls_joined_total",
                     "Reads that waited on a pull of the same version already running.",
                     stats.pulls_joined, MetricType::Counter},
          std::tuple{"tensord_cluster_stale_copies_dropped_total",
                     "Copies dropped here because another node overwrote or deleted the name.",
                     stats.stale_copies_dropped, MetricType::Counter},
          std::tuple{"tensord_cluster_record_reads_total",
                     "Name records read from etcd for reads of latest versions.",
                     stats.record_reads, MetricType::Counter},
          std::tuple{"tensord_cluster_record_read_txns_total",
                     "etcd transactions those reads took (shared by concurrent reads).",
                     stats.record_read_txns, MetricType::Counter},
          std::tuple{"tensord_cluster_record_writes_total",
                     "Name records written (durable puts, deletes).", stats.record_writes,
                     MetricType::Counter},
          std::tuple{"tensord_cluster_record_write_txns_total",
                     "etcd transactions those writes took (group commits).",
                     stats.record_write_txns, MetricType::Counter},
          std::tuple{"tensord_cluster_cache_locations",
                     "Places of cache copies this node keeps as their names' home.",
                     stats.cache_locations, MetricType::Gauge}}) {
      MetricFamily family = Family(name, help, type);
      if (type == MetricType::Counter) {
        AddCounter(family, {}, static_cast<double>(value));
      } else {
        AddGauge(family, {}, static_cast<double>(value));
      }
      families.push_back(std::move(family));
    }
  }

  void CollectCalls(std::vector<MetricFamily>& families) const {
    const ServiceMetricsSnapshot snapshot = server_.metrics().Snapshot();
    MetricFamily requests =
        Family("tensord_rpc_requests_total",
               "Finished TensorService calls by method and gRPC status code.", MetricType::Counter);
    MetricFamily errors =
        Family("tensord_rpc_errors_total", "Finished TensorService calls whose code was not OK.",
               MetricType::Counter);
    MetricFamily duration =
        Family("tensord_rpc_duration_seconds",
               "TensorService call duration (for Put and Fetch, the whole stream).",
               MetricType::Histogram);
    for (size_t rpc = 0; rpc < kRpcCount; ++rpc) {
      const std::string name(RpcName(static_cast<Rpc>(rpc)));
      uint64_t failed = 0;
      for (size_t code = 0; code < kStatusCodeCount; ++code) {
        const uint64_t count = snapshot.calls[rpc][code];
        if (code != 0) failed += count;
        // OK is always present so rates have a series; other codes appear
        // once they happen, keeping a scrape small.
        if (code != 0 && count == 0) continue;
        AddCounter(requests,
                   {{"rpc", name},
                    {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(code))}},
                   static_cast<double>(count));
      }
      AddCounter(errors, {{"rpc", name}}, static_cast<double>(failed));
      AddHistogram(duration, {{"rpc", name}}, snapshot.latency[rpc]);
    }
    MetricFamily remote = Family("tensord_remote_bytes_total",
                                 "Tensor payload bytes over gRPC: received by Put, sent by Fetch.",
                                 MetricType::Counter);
    AddCounter(remote, {{"direction", "received"}},
               static_cast<double>(snapshot.remote_bytes_received));
    AddCounter(remote, {{"direction", "sent"}}, static_cast<double>(snapshot.remote_bytes_sent));
    MetricFamily handoff =
        Family("tensord_handoff_bytes_total",
               "Tensor bytes passed zero-copy over the handoff socket: sent to local readers (per "
               "lease handed out), received from local producers (per seal).",
               MetricType::Counter);
    AddCounter(handoff, {{"direction", "received"}},
               static_cast<double>(snapshot.handoff_bytes_received));
    AddCounter(handoff, {{"direction", "sent"}}, static_cast<double>(snapshot.handoff_bytes_sent));
    MetricFamily batch_items =
        Family("tensord_batch_items_total",
               "Items of BatchPut and BatchFetch calls by outcome: each item counts as the single "
               "call it stands for.",
               MetricType::Counter);
    for (Rpc rpc : {Rpc::kBatchPut, Rpc::kBatchFetch}) {
      const std::string name(RpcName(rpc));
      const auto& items = snapshot.batch_items[static_cast<size_t>(rpc)];
      AddCounter(batch_items, {{"rpc", name}, {"result", "ok"}}, static_cast<double>(items[0]));
      AddCounter(batch_items, {{"rpc", name}, {"result", "failed"}}, static_cast<double>(items[1]));
    }
    MetricFamily watch_events = Family("tensord_watch_events_total",
                                       "Change events sent to Watch callers.", MetricType::Counter);
    AddCounter(watch_events, {}, static_cast<double>(snapshot.watch_events_sent));
    MetricFamily fell_behind =
        Family("tensord_watch_fell_behind_total",
               "Times a watcher was told it had fallen further behind than the change history "
               "(--watch-history) and may have missed changes.",
               MetricType::Counter);
    AddCounter(fell_behind, {}, static_cast<double>(snapshot.watch_fell_behind));
    MetricFamily watches =
        Family("tensord_watches_open", "Watch calls open now (--max-watches).", MetricType::Gauge);
    AddGauge(watches, {}, static_cast<double>(server_.open_watches()));
    for (MetricFamily* family : {&requests, &errors, &duration, &remote, &handoff, &batch_items,
                                 &watch_events, &fell_behind, &watches}) {
      families.push_back(std::move(*family));
    }
  }

  void CollectHandoff(std::vector<MetricFamily>& families) const {
    const HandoffServer* handoff = server_.handoff();
    MetricFamily connections =
        Family("tensord_handoff_connections", "Local clients connected to the handoff socket.",
               MetricType::Gauge);
    AddGauge(connections, {},
             handoff == nullptr ? 0 : static_cast<double>(handoff->connection_count()));
    MetricFamily leases =
        Family("tensord_handoff_leases", "Leases held by local clients.", MetricType::Gauge);
    AddGauge(leases, {}, handoff == nullptr ? 0 : static_cast<double>(handoff->lease_count()));
    families.push_back(std::move(connections));
    families.push_back(std::move(leases));
  }

  void CollectConnections(std::vector<MetricFamily>& families) const {
    const ServiceMetricsSnapshot snapshot = server_.metrics().Snapshot();
    const HandoffServer* handoff = server_.handoff();
    MetricFamily open =
        Family("tensord_connections", "Connections open now, by listener (grpc, handoff).",
               MetricType::Gauge);
    AddGauge(open, {{"listener", "grpc"}},
             static_cast<double>(server_.listener().open_connections()));
    AddGauge(open, {{"listener", "handoff"}},
             handoff == nullptr ? 0 : static_cast<double>(handoff->connection_count()));
    MetricFamily limit = Family("tensord_connections_limit",
                                "Connection caps (--max-connections, --max-handoff-connections).",
                                MetricType::Gauge);
    AddGauge(limit, {{"listener", "grpc"}},
             static_cast<double>(server_.listener().max_connections()));
    AddGauge(limit, {{"listener", "handoff"}},
             handoff == nullptr ? 0 : static_cast<double>(handoff->max_connections()));
    MetricFamily accepted =
        Family("tensord_connections_accepted_total",
               "Connections accepted and served, by listener.", MetricType::Counter);
    MetricFamily refused =
        Family("tensord_connections_refused_total",
               "Connections closed as soon as accepted: at the connection cap (connection_cap) or "
               "with no fd left for them (fd_limit).",
               MetricType::Counter);
    for (size_t listener = 0; listener < kListenerCount; ++listener) {
      const std::string name(ListenerName(static_cast<Listener>(listener)));
      AddCounter(accepted, {{"listener", name}},
                 static_cast<double>(snapshot.connections_accepted[listener]));
      for (size_t reason = 0; reason < kConnectionRefusalCount; ++reason) {
        AddCounter(refused,
                   {{"listener", name},
                    {"reason",
                     std::string(ConnectionRefusalName(static_cast<ConnectionRefusal>(reason)))}},
                   static_cast<double>(snapshot.connections_refused[listener][reason]));
      }
    }
    MetricFamily fds =
        Family("tensord_open_fds", "File descriptors the process holds.", MetricType::Gauge);
    AddGauge(fds, {}, static_cast<double>(OpenFileCount()));
    MetricFamily fd_limit =
        Family("tensord_open_fds_limit", "RLIMIT_NOFILE: the most fds the process may hold.",
               MetricType::Gauge);
    AddGauge(fd_limit, {}, static_cast<double>(OpenFileLimit()));
    MetricFamily exhausted =
        Family("tensord_fd_exhaustion_total",
               "Operations that failed for want of an fd (EMFILE/ENFILE): accepts and calls.",
               MetricType::Counter);
    AddCounter(exhausted, {}, static_cast<double>(FdExhaustionLog().failures()));
    for (MetricFamily* family : {&open, &limit, &accepted, &refused, &fds, &fd_limit, &exhausted}) {
      families.push_back(std::move(*family));
    }
  }

  const TensorServer& server_;
};

absl::StatusOr<std::unique_ptr<MetricsExporter>> MetricsExporter::Start(
    const std::string& listen_address, const TensorServer& server) {
  const size_t colon = listen_address.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen_address.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics listen address '", listen_address,
                                                   "' is not host:port (port 0..65535)"));
  }
  std::unique_ptr<MetricsExporter> exporter(new MetricsExporter());
  exporter->collectable_ = std::make_shared<MetricsCollectable>(server);
  // civetweb reports a bind failure by throwing; nothing else here throws.
  try {
    exporter->exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", listen_address, "num_threads", "2",
                                 // A stalled scraper must not hold a thread forever.
                                 "request_timeout_ms", "10000"});
  } catch (const std::exception& error) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on '", listen_address, "': ", error.what()));
  }
  exporter->exposer_->RegisterCollectable(exporter->collectable_);
  std::vector<int> ports = exporter->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(
        absl::StrCat("metrics server on '", listen_address, "' reports no listening port"));
  }
  exporter->bound_address_ = absl::StrCat(listen_address.substr(0, colon), ":", ports.front());
  return exporter;
}

MetricsExporter::~MetricsExporter() = default;

}  // namespace tensord
