#include "service/metrics/service_metrics.h"

namespace tensord {

absl::string_view RpcName(Rpc rpc) {
  switch (rpc) {
    case Rpc::kPut: return "Put";
    case Rpc::kFetch: return "Fetch";
    case Rpc::kStat: return "Stat";
    case Rpc::kList: return "List";
    case Rpc::kDelete: return "Delete";
    case Rpc::kGetServerInfo: return "GetServerInfo";
    case Rpc::kIssueHandoffToken: return "IssueHandoffToken";
    case Rpc::kSnapshot: return "Snapshot";
    case Rpc::kBatchPut: return "BatchPut";
    case Rpc::kBatchFetch: return "BatchFetch";
    case Rpc::kWatch: return "Watch";
    case Rpc::kReplicate: return "Replicate";
    case Rpc::kAnnounceCopies: return "AnnounceCopies";
    case Rpc::kFetchInline: return "FetchInline";
    case Rpc::kLocateCopy: return "LocateCopy";
  }
  return "Unknown";
}

absl::string_view ListenerName(Listener listener) {
  return listener == Listener::kGrpc ? "grpc" : "handoff";
}

absl::string_view ConnectionRefusalName(ConnectionRefusal reason) {
  return reason == ConnectionRefusal::kAtCap ? "connection_cap" : "fd_limit";
}

void ServiceMetrics::RecordCall(Rpc rpc, absl::StatusCode code, absl::Duration latency) {
  const size_t rpc_index = static_cast<size_t>(rpc);
  if (rpc_index >= kRpcCount) return;
  size_t code_index = static_cast<size_t>(code);
  // A code outside the canonical range is counted as UNKNOWN, as gRPC would.
  if (code_index >= kStatusCodeCount) code_index = static_cast<size_t>(absl::StatusCode::kUnknown);
  Add(calls_[rpc_index][code_index], 1);
  latency_[rpc_index].Observe(latency);
}

ServiceMetricsSnapshot ServiceMetrics::Snapshot() const {
  ServiceMetricsSnapshot snapshot;
  for (size_t rpc = 0; rpc < kRpcCount; ++rpc) {
    for (size_t code = 0; code < kStatusCodeCount; ++code) {
      snapshot.calls[rpc][code] = calls_[rpc][code].load(std::memory_order_relaxed);
    }
    snapshot.latency[rpc] = latency_[rpc].Snapshot();
    for (size_t outcome = 0; outcome < 2; ++outcome) {
      snapshot.batch_items[rpc][outcome] =
          batch_items_[rpc][outcome].load(std::memory_order_relaxed);
    }
  }
  snapshot.remote_bytes_received = remote_bytes_received_.load(std::memory_order_relaxed);
  snapshot.remote_bytes_sent = remote_bytes_sent_.load(std::memory_order_relaxed);
  snapshot.handoff_bytes_sent = handoff_bytes_sent_.load(std::memory_order_relaxed);
  snapshot.handoff_bytes_received = handoff_bytes_received_.load(std::memory_order_relaxed);
  snapshot.watch_events_sent = watch_events_sent_.load(std::memory_order_relaxed);
  snapshot.watch_fell_behind = watch_fell_behind_.load(std::memory_order_relaxed);
  for (size_t listener = 0; listener < kListenerCount; ++listener) {
    snapshot.connections_accepted[listener] =
        connections_accepted_[listener].load(std::memory_order_relaxed);
    for (size_t reason = 0; reason < kConnectionRefusalCount; ++reason) {
      snapshot.connections_refused[listener][reason] =
          connections_refused_[listener][reason].load(std::memory_order_relaxed);
    }
  }
  return snapshot;
}

}  // namespace tensord
