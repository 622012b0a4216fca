// The calls between the nodes of a cluster: Replicate (copy an ordered
// version and join its holders), AnnounceCopies and LocateCopy (where cache
// copies are). Each needs the cluster permission when tokens are checked.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/common/tensor_name.h"
#include "service/transport/call_record.h"
#include "service/transport/tensor_service.h"
#include "service/wire/status_conversion.h"

namespace tensord {
namespace {

absl::Status SingleNode(absl::string_view rpc) {
  return absl::FailedPreconditionError(
      absl::StrCat(rpc, " is a call between cluster nodes; this server is a single node"));
}

}  // namespace

grpc::ServerUnaryReactor* TensorService::Replicate(grpc::CallbackServerContext* context,
                                                   const v1::ReplicateRequest* request,
                                                   v1::ReplicateResponse* response) {
  CallRecord call(Rpc::kReplicate, *context, metrics_);
  absl::StatusOr<const TokenGrant*> grant = AdmitCall(context, "Replicate", request->name());
  if (!grant.ok()) return FinishUnary(context, grant.status(), call);
  absl::Status valid = CheckName(*grant, "Replicate", request->name());
  if (valid.ok()) valid = ValidateTensorName(request->name());
  if (valid.ok() && options_.cluster_access == nullptr) valid = SingleNode("Replicate");
  if (valid.ok() && (request->source_node().empty() || request->origin() <= 0)) {
    valid = absl::InvalidArgumentError(
        absl::StrCat("Replicate of '", request->name(),
                     "' needs a source_node and a positive origin (got node '",
                     request->source_node(), "', origin ", request->origin(), ")"));
  }
  if (!valid.ok()) return FinishUnary(context, valid, call);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto record = std::make_shared<CallRecord>(std::move(call));
  options_.cluster_access->Replicate(
      ReplicaSource{.name = request->name(),
                    .node = request->source_node(),
                    .origin = request->origin(),
                    .total_bytes = request->total_bytes(),
                    .crc32c = request->crc32c()},
      [this, request, response, reactor, record](absl::Status status) {
        if (status.ok()) response->set_version(registry_.LatestVersionOf(request->name()));
        record->End(status);
        reactor->Finish(ToGrpcStatus(status));
      });
  return reactor;
}

grpc::ServerUnaryReactor* TensorService::AnnounceCopies(grpc::CallbackServerContext* context,
                                                        const v1::AnnounceCopiesRequest* request,
                                                        v1::AnnounceCopiesResponse*) {
  CallRecord call(Rpc::kAnnounceCopies, *context, metrics_);
  absl::StatusOr<const TokenGrant*> grant = AdmitCall(context, "AnnounceCopies");
  if (!grant.ok()) return FinishUnary(context, grant.status(), call);
  if (options_.cluster_access == nullptr)
    return FinishUnary(context, SingleNode("AnnounceCopies"), call);
  std::vector<CopyLocation> copies;
  copies.reserve(request->copies_size());
  for (const v1::CopyLocation& copy : request->copies()) {
    if (absl::Status valid = ValidateTensorName(copy.name());
        !valid.ok() || copy.node().empty() || copy.version() == 0) {
      return FinishUnary(context,
                         absl::InvalidArgumentError(absl::StrCat(
                             "AnnounceCopies: the place of '", copy.name(), "' (node '",
                             copy.node(), "', version ", copy.version(), ") is not one")),
                         call);
    }
    copies.push_back(CopyLocation{.name = copy.name(),
                                  .node = copy.node(),
                                  .version = copy.version(),
                                  .total_bytes = copy.total_bytes(),
                                  .crc32c = copy.crc32c()});
  }
  options_.cluster_access->AnnounceCopies(std::move(copies));
  return FinishUnary(context, absl::OkStatus(), call);
}

grpc::ServerUnaryReactor* TensorService::LocateCopy(grpc::CallbackServerContext* context,
                                                    const v1::LocateCopyRequest* request,
                                                    v1::LocateCopyResponse* response) {
  CallRecord call(Rpc::kLocateCopy, *context, metrics_);
  absl::StatusOr<const TokenGrant*> grant = AdmitCall(context, "LocateCopy", request->name());
  if (!grant.ok()) return FinishUnary(context, grant.status(), call);
  if (absl::Status valid = ValidateTensorName(request->name()); !valid.ok()) {
    return FinishUnary(context, valid, call);
  }
  if (options_.cluster_access == nullptr)
    return FinishUnary(context, SingleNode("LocateCopy"), call);
  absl::StatusOr<CopyLocation> found = options_.cluster_access->LocateCopy(request->name());
  if (found.ok()) {
    v1::CopyLocation* out = response->mutable_location();
    out->set_name(found->name);
    out->set_node(found->node);
    out->set_version(found->version);
    out->set_total_bytes(found->total_bytes);
    out->set_crc32c(found->crc32c);
  }
  return FinishUnary(context, found.status(), call);
}

}  // namespace tensord
