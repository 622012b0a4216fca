#include "client/src/call_routing.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "service/wire/status_conversion.h"

namespace tensord {
namespace {

constexpr absl::string_view kServerAnswerPayload = "type.tensord/handoff-answer";

}  // namespace

absl::StatusOr<Transport> RouteCall(const RoutedCall& call, TransferPath path,
                                    absl::FunctionRef<absl::Status()> local) {
  switch (call.kind) {
    case CallKind::kGrpcOnly: return Transport::kRemote;
    case CallKind::kSealGroup: {
      const absl::Status found = local();
      if (found.ok()) return Transport::kLocal;
      return absl::UnavailableError(
          absl::StrCat("SealGroup seals local creates, and this client has no local handoff "
                       "connection: ",
                       found.message()));
    }
    case CallKind::kPut:
      if (call.device_put || call.replicas > 1) {
        if (path != TransferPath::kLocal) return Transport::kRemote;
        return absl::FailedPreconditionError(
            call.device_put
                ? absl::StrCat(call.what,
                               " needs TransferPath::kRemote or kAuto; on the server's host, "
                               "Create with CreateOptions::device writes device memory in "
                               "place")
                : absl::StrCat(call.what, " with replicas=", call.replicas,
                               " needs TransferPath::kRemote or kAuto: the local handoff "
                               "publishes on one node"));
      }
      break;
    case CallKind::kFetch:
    case CallKind::kBatchFetch:
    case CallKind::kBatchPut:
    case CallKind::kCreate: break;
  }
  switch (path) {
    case TransferPath::kRemote: return Transport::kRemote;
    case TransferPath::kAuto: return local().ok() ? Transport::kLocal : Transport::kRemote;
    case TransferPath::kLocal: {
      absl::Status found = local();
      if (found.ok()) return Transport::kLocal;
      return found;
    }
  }
  return absl::InternalError(absl::StrCat("transfer path ", static_cast<int>(path), " is unknown"));
}

AfterLocal AfterLocalAnswer(CallKind kind, TransferPath path, const absl::Status& answer) {
  if (kind == CallKind::kBatchPut && IsUseRemote(answer)) return AfterLocal::kRetryRemote;
  if (path != TransferPath::kAuto || answer.ok()) return AfterLocal::kStands;
  if (kind == CallKind::kCreate || kind == CallKind::kSealGroup) return AfterLocal::kStands;
  if (IsUseRemote(answer)) return AfterLocal::kRetryRemote;  // the connection is fine
  if (IsServerAnswer(answer)) return AfterLocal::kStands;
  if (answer.code() == absl::StatusCode::kUnavailable) return AfterLocal::kForgetLocalAndRetry;
  return AfterLocal::kStands;
}

absl::Status RoutingStatus(const absl::StatusOr<std::vector<absl::StatusOr<Tensor>>>& answer) {
  if (!answer.ok()) return answer.status();
  for (const absl::StatusOr<Tensor>& item : *answer) {
    if (IsUseRemote(item.status())) return item.status();
  }
  return absl::OkStatus();
}

absl::Status MarkServerAnswer(absl::Status status) {
  status.SetPayload(kServerAnswerPayload, absl::Cord("1"));
  return status;
}

bool IsServerAnswer(const absl::Status& status) {
  return status.GetPayload(kServerAnswerPayload).has_value();
}

}  // namespace tensord
