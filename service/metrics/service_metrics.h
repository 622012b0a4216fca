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
};
inline constexpr size_t kRpcCount = 8;
// Canonical codes OK (0) .. UNAUTHENTICATED (16).
inline constexpr size_t kStatusCodeCount = 17;

// "Put", "Fetch", ...: the method name on the wire.
absl::string_view RpcName(Rpc rpc);

// A copy of every counter, for one scrape.
struct ServiceMetricsSnapshot {
  // calls[rpc][code]: finished calls of each RPC by canonical status code.
  std::array<std::array<uint64_t, kStatusCodeCount>, kRpcCount> calls{};
  std::array<LatencySnapshot, kRpcCount> latency{};
  uint64_t remote_bytes_received = 0;  // put payload bytes
  uint64_t remote_bytes_sent = 0;      // fetch payload bytes
  uint64_t handoff_bytes_sent = 0;     // bytes of versions handed to local readers
  uint64_t handoff_bytes_received = 0; // bytes sealed by local producers
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
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_METRICS_SERVICE_METRICS_H_
