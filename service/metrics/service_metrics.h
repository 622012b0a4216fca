// What the transport records about calls and bytes, as plain atomics: no
// Prometheus (or gRPC) types here, so the engine stays free of them and the
// exporter (server/metrics_exporter) turns a snapshot into metrics at
// scrape time. Gauges that mirror registry state are not kept here at all;
// the exporter reads them from the registry when scraped.
#ifndef TENSORD_SERVICE_METRICS_SERVICE_METRICS_H_
#define TENSORD_SERVICE_METRICS_SERVICE_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "service/metrics/latency_histogram.h"

namespace tensord {

// The methods of tensord.v1.TensorService.
enum class Rpc : uint8_t {
  kPut,
  kFetch,
  kStat,
  kList,
  kDelete,
  kGetServerInfo,
  kIssueHandoffToken,
  kSnapshot,
  kBatchPut,
  kBatchFetch,
  kWatch,
  kReplicate,
  kAnnounceCopies,
  kFetchInline,
  kLocateCopy,
};
inline constexpr size_t kRpcCount = 15;
// Canonical codes OK (0) .. UNAUTHENTICATED (16).
inline constexpr size_t kStatusCodeCount = 17;

// "Put", "Fetch", ...: the method name on the wire.
absl::string_view RpcName(Rpc rpc);

// The two kinds of listener whose connections are admitted and counted.
enum class Listener : uint8_t { kGrpc, kHandoff };
inline constexpr size_t kListenerCount = 2;
// "grpc", "handoff".
absl::string_view ListenerName(Listener listener);

// Why a connection was closed as soon as it was accepted.
enum class ConnectionRefusal : uint8_t {
  kAtCap,      // --max-connections / --max-handoff-connections reached
  kAtFdLimit,  // the process had no fd left for it (RLIMIT_NOFILE)
};
inline constexpr size_t kConnectionRefusalCount = 2;
// "connection_cap", "fd_limit".
absl::string_view ConnectionRefusalName(ConnectionRefusal reason);

// A copy of every counter, for one scrape.
struct ServiceMetricsSnapshot {
  // calls[rpc][code]: finished calls of each RPC by canonical status code.
  std::array<std::array<uint64_t, kStatusCodeCount>, kRpcCount> calls{};
  std::array<LatencySnapshot, kRpcCount> latency{};
  uint64_t remote_bytes_received = 0;   // put payload bytes
  uint64_t remote_bytes_sent = 0;       // fetch payload bytes
  uint64_t handoff_bytes_sent = 0;      // bytes of versions handed to local readers
  uint64_t handoff_bytes_received = 0;  // bytes sealed by local producers
  // [rpc][0]: items of batch calls that succeeded, [rpc][1]: that failed.
  std::array<std::array<uint64_t, 2>, kRpcCount> batch_items{};
  uint64_t watch_events_sent = 0;  // events sent to watchers
  uint64_t watch_fell_behind = 0;  // times a watcher was told it missed changes
  // [listener]: connections accepted and served.
  std::array<uint64_t, kListenerCount> connections_accepted{};
  // [listener][reason]: connections closed at once instead.
  std::array<std::array<uint64_t, kConnectionRefusalCount>, kListenerCount> connections_refused{};
};

// Thread-safe; every Record/Add is a few relaxed atomic adds, no lock.
class ServiceMetrics {
 public:
  // One finished call: its code and its whole duration (for streams, from
  // the first message to the end of the call).
  void RecordCall(Rpc rpc, absl::StatusCode code, absl::Duration latency);

  void AddRemoteBytesReceived(uint64_t bytes) { Add(remote_bytes_received_, bytes); }
  void AddRemoteBytesSent(uint64_t bytes) { Add(remote_bytes_sent_, bytes); }
  void AddHandoffBytesSent(uint64_t bytes) { Add(handoff_bytes_sent_, bytes); }
  void AddHandoffBytesReceived(uint64_t bytes) { Add(handoff_bytes_received_, bytes); }
  // The items of one batch call: each counts as a call of its own would.
  void AddBatchItems(Rpc rpc, uint64_t succeeded, uint64_t failed) {
    Add(batch_items_[static_cast<size_t>(rpc)][0], succeeded);
    Add(batch_items_[static_cast<size_t>(rpc)][1], failed);
  }
  void AddWatchEventsSent(uint64_t events) { Add(watch_events_sent_, events); }
  void AddWatchFellBehind() { Add(watch_fell_behind_, 1); }
  void AddConnectionAccepted(Listener listener) {
    Add(connections_accepted_[static_cast<size_t>(listener)], 1);
  }
  void AddConnectionRefused(Listener listener, ConnectionRefusal reason) {
    Add(connections_refused_[static_cast<size_t>(listener)][static_cast<size_t>(reason)], 1);
  }

  ServiceMetricsSnapshot Snapshot() const;

 private:
  static void Add(std::atomic<uint64_t>& counter, uint64_t value) {
    counter.fetch_add(value, std::memory_order_relaxed);
  }

  std::array<std::array<std::atomic<uint64_t>, kStatusCodeCount>, kRpcCount> calls_{};
  std::array<LatencyHistogram, kRpcCount> latency_{};
  std::atomic<uint64_t> remote_bytes_received_{0};
  std::atomic<uint64_t> remote_bytes_sent_{0};
  std::atomic<uint64_t> handoff_bytes_sent_{0};
  std::atomic<uint64_t> handoff_bytes_received_{0};
  std::array<std::array<std::atomic<uint64_t>, 2>, kRpcCount> batch_items_{};
  std::atomic<uint64_t> watch_events_sent_{0};
  std::atomic<uint64_t> watch_fell_behind_{0};
  std::array<std::atomic<uint64_t>, kListenerCount> connections_accepted_{};
  std::array<std::array<std::atomic<uint64_t>, kConnectionRefusalCount>, kListenerCount>
      connections_refused_{};
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_METRICS_SERVICE_METRICS_H_
