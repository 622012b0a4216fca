#include "service/cluster/etcd_status.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tensord {
namespace {

// Go's context.DeadlineExceeded, which etcd 3.4 passes through as UNKNOWN.
constexpr absl::string_view kDeadlinePassedInsideEtcd = "context deadline exceeded";
// gRPC 1.51's words for a connection whose HTTP/2 handshake did not finish
// within the connect timeout.
constexpr absl::string_view kConnectTimedOut = "timed out before receiving SETTINGS frame";

}  // namespace

absl::Status EtcdCallStatus(const grpc::Status& status, absl::string_view what,
                            absl::string_view endpoint) {
  const std::string& message = status.error_message();
  std::string advice;
  if (absl::StrContains(message, "database space exceeded")) {
    advice =
        " (etcd's backend quota, --quota-backend-bytes, is full and its NOSPACE alarm is "
        "raised: it refuses writes until its history is compacted, the database "
        "defragmented (etcdctl defrag) and the alarm disarmed (etcdctl alarm disarm))";
  } else if (absl::StrContains(message, "too many operations in txn request")) {
    advice = " (etcd's --max-txn-ops is lower than tensord's --etcd-max-txn-ops: set them alike)";
  } else if (absl::StrContains(message, "request is too large")) {
    advice = " (etcd's --max-request-bytes, 1.5 MiB by default, is smaller than the request)";
  }
  absl::StatusCode code = static_cast<absl::StatusCode>(status.error_code());
  if (code == absl::StatusCode::kUnknown && message == kDeadlinePassedInsideEtcd) {
    code = absl::StatusCode::kDeadlineExceeded;
  }
  // gRPC's connect gave up waiting: etcd's listener took the connection
  // but answered too slowly, which is a slow etcd, not an absent one.
  if (code == absl::StatusCode::kUnavailable && absl::StrContains(message, kConnectTimedOut)) {
    code = absl::StatusCode::kDeadlineExceeded;
  }
  return absl::Status(code, absl::StrCat("etcd ", what, " at ", endpoint, ": ", message, advice));
}

bool IsEtcdEndpointFailure(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

}  // namespace tensord
