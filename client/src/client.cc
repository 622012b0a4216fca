// The public API: checks arguments, then hands each call to the transport
// TransportSelector picks (data calls) or to gRPC (calls only it serves).
#include "tensord/client.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/src/call_cancellation.h"
#include "client/src/host_tensor_source.h"
#include "client/src/transfer_streams.h"
#include "client/src/transport_selector.h"
#include "service/common/malloc_tuning.h"
#include "service/common/status_macros.h"
#include "service/common/tensor_name.h"
#include "service/wire/status_conversion.h"

namespace tensord {

struct Client::Rep {
  explicit Rep(const ClientOptions& options, std::shared_ptr<RemoteTransport> remote)
      : transports(options.path, options.handoff_socket, std::move(remote)) {}
  TransportSelector transports;

  absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> BatchFetch(const BatchSelection& selection,
                                                                 const FetchOptions& options,
                                                                 const CallOptions& call) {
    return transports.Run(
        RoutedCall{.kind = CallKind::kBatchFetch},
        [&](ClientTransport& transport) { return transport.BatchFetch(selection, options, call); });
  }
};

void TuneMallocForTransfers() { KeepFreedHeapForTransfers(); }

Client::Client(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}
Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<RemoteTransport> remote,
                           RemoteTransport::Connect(options));
  return std::unique_ptr<Client>(new Client(std::make_unique<Rep>(options, std::move(remote))));
}

absl::StatusOr<TensorInfo> Client::Put(absl::string_view name, const DLTensor& tensor,
                                       const PutOptions& options, const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  TENSORD_RETURN_IF_ERROR(ValidateHostTensor(tensor, "tensor"));
  TENSORD_RETURN_IF_ERROR(ValidateTransferStreams(options.streams));
  RoutedCall routed{.kind = CallKind::kPut,
                    .device_put = options.device.has_value(),
                    .replicas = options.replicas,
                    .what = absl::StrCat("put of '", name, "'")};
  if (options.device.has_value()) {
    absl::StrAppend(&routed.what, " into device memory (device type ", options.device->device_type,
                    ", id ", options.device->device_id, ")");
  }
  return rep_->transports.Run(routed, [&](ClientTransport& transport) {
    return transport.Put(name, tensor, options, call);
  });
}

absl::StatusOr<Tensor> Client::Fetch(absl::string_view name, const FetchOptions& options,
                                     const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  return rep_->transports.Run(
      RoutedCall{.kind = CallKind::kFetch},
      [&](ClientTransport& transport) { return transport.Fetch(name, options, call); });
}

absl::StatusOr<TensorInfo> Client::FetchInto(absl::string_view name, const DLTensor& destination,
                                             const FetchOptions& options, const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  TENSORD_RETURN_IF_ERROR(ValidateHostTensor(destination, "destination"));
  return rep_->transports.Run(RoutedCall{.kind = CallKind::kFetch},
                              [&](ClientTransport& transport) {
                                return transport.FetchInto(name, destination, options, call);
                              });
}

absl::StatusOr<TensorInfo> Client::FetchBytes(absl::string_view name, uint64_t offset,
                                              uint64_t length, std::string& out,
                                              const FetchOptions& options,
                                              const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  return rep_->transports.remote().FetchBytes(name, offset, length, out, options, call);
}

absl::StatusOr<TensorInfo> Client::Stat(absl::string_view name, uint64_t version,
                                        const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  return rep_->transports.remote().Stat(name, version, call);
}

absl::StatusOr<ListResult> Client::List(absl::string_view prefix, uint32_t page_size,
                                        absl::string_view page_token, const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  return rep_->transports.remote().List(prefix, page_size, page_token, /*cluster=*/false, call);
}

absl::StatusOr<std::unique_ptr<WatchStream>> Client::Watch(absl::string_view prefix,
                                                           const WatchOptions& options,
                                                           const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  TENSORD_RETURN_IF_ERROR(ValidateNamePrefix(prefix));
  if (options.send_existing && options.from_version != 0) {
    return absl::InvalidArgumentError(absl::StrCat("WatchOptions: send_existing and from_version ",
                                                   options.from_version, " exclude each other"));
  }
  if (options.max_buffered_events == 0) {
    return absl::InvalidArgumentError("WatchOptions::max_buffered_events must be at least 1");
  }
  return rep_->transports.remote().Watch(prefix, options, call);
}

absl::StatusOr<ListResult> Client::ListCluster(absl::string_view prefix, uint32_t page_size,
                                               absl::string_view page_token,
                                               const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  TENSORD_RETURN_IF_ERROR(ValidateNamePrefix(prefix));
  return rep_->transports.remote().List(prefix, page_size, page_token, /*cluster=*/true, call);
}

absl::StatusOr<std::vector<TensorInfo>> Client::ListAll(absl::string_view prefix,
                                                        const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  std::vector<TensorInfo> all;
  std::string token;
  do {
    TENSORD_ASSIGN_OR_RETURN(ListResult page, List(prefix, 1000, token, call));
    for (TensorInfo& info : page.tensors) all.push_back(std::move(info));
    token = std::move(page.next_page_token);
  } while (!token.empty());
  return all;
}

absl::StatusOr<uint64_t> Client::Delete(absl::string_view name, uint64_t version,
                                        const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  return rep_->transports.remote().Delete(name, version, call);
}

absl::StatusOr<std::unique_ptr<TensorWriter>> Client::Create(absl::string_view name,
                                                             DLDataType dtype,
                                                             std::span<const int64_t> shape,
                                                             Retention retention,
                                                             const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  CreateOptions options;
  options.retention = retention;
  return Create(name, dtype, shape, options, call);
}

absl::StatusOr<std::unique_ptr<TensorWriter>> Client::Create(absl::string_view name,
                                                             DLDataType dtype,
                                                             std::span<const int64_t> shape,
                                                             const CreateOptions& options,
                                                             const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  return rep_->transports.Run(RoutedCall{.kind = CallKind::kCreate},
                              [&](ClientTransport& transport) {
                                return transport.Create(name, dtype, shape, options, call);
                              });
}

absl::StatusOr<BatchPutResult> Client::BatchPut(std::span<const BatchPutItem> items,
                                                const BatchPutOptions& options,
                                                const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  if (options.atomic && items.size() > kMaxBatchItems) {
    return absl::InvalidArgumentError(absl::StrCat("atomic batch of ", items.size(),
                                                   " items; one atomic batch holds at most ",
                                                   kMaxBatchItems));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    absl::Status valid = ValidateTensorName(items[i].name);
    if (valid.ok()) valid = ValidateHostTensor(items[i].tensor, "tensor");
    if (!valid.ok()) {
      return absl::Status(valid.code(), absl::StrCat("batch item ", i, " ('", items[i].name,
                                                     "'): ", valid.message()));
    }
  }
  BatchPutResult result;
  result.items.reserve(items.size());
  for (size_t start = 0; start < items.size() || (start == 0 && items.empty());
       start += kMaxBatchItems) {
    const std::span<const BatchPutItem> part =
        items.subspan(start, std::min(kMaxBatchItems, items.size() - start));
    BatchPutOptions part_options = options;
    if (options.progress) {
      part_options.progress = [&options, start, total = items.size()](uint64_t done, uint64_t) {
        options.progress(start + done, total);
      };
    }
    TENSORD_ASSIGN_OR_RETURN(
        BatchPutResult sent,
        rep_->transports.Run(RoutedCall{.kind = CallKind::kBatchPut, .what = "batch put"},
                             [&](ClientTransport& transport) {
                               return transport.BatchPut(part, part_options, call);
                             }));
    result.group_version = sent.group_version;
    result.cluster_group = sent.cluster_group;
    for (auto& item : sent.items) result.items.push_back(std::move(item));
    if (items.empty()) break;
  }
  return result;
}

absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> Client::BatchFetch(
    std::span<const TensorRef> items, const FetchOptions& options, const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  // Bad names fail only themselves, as missing ones do; the valid ones are
  // indexed (valid_index: their places in `items`) and copied out only when
  // some are not.
  std::vector<size_t> valid_index;
  std::vector<std::pair<size_t, absl::Status>> bad_names;
  for (size_t i = 0; i < items.size(); ++i) {
    absl::Status name = ValidateTensorName(items[i].name);
    if (name.ok()) {
      if (!bad_names.empty()) valid_index.push_back(i);
      continue;
    }
    if (bad_names.empty()) {
      valid_index.reserve(items.size() - 1);
      for (size_t before = 0; before < i; ++before) valid_index.push_back(before);
    }
    bad_names.emplace_back(i, std::move(name));
  }
  std::vector<TensorRef> valid_copy;
  std::span<const TensorRef> valid = items;
  if (!bad_names.empty()) {
    valid_copy.reserve(valid_index.size());
    for (size_t i : valid_index) valid_copy.push_back(items[i]);
    valid = valid_copy;
  }
  std::vector<absl::StatusOr<Tensor>> result;
  for (size_t start = 0; start < valid.size(); start += kMaxBatchItems) {
    BatchSelection selection;
    selection.items = valid.subspan(start, std::min(kMaxBatchItems, valid.size() - start));
    TENSORD_ASSIGN_OR_RETURN(std::vector<absl::StatusOr<Tensor>> fetched,
                             rep_->BatchFetch(selection, options, call));
    // An item the transport gave no answer for fails alone.
    while (fetched.size() < selection.items.size()) {
      fetched.emplace_back(absl::InternalError("not fetched"));
    }
    fetched.resize(selection.items.size());
    // One call for every name: its answer is the result as it is, not
    // moved into a second vector of a thousand results.
    if (fetched.size() == items.size()) return fetched;
    result.resize(items.size());
    for (size_t i = 0; i < fetched.size(); ++i) {
      const size_t at = start + i;
      result[bad_names.empty() ? at : valid_index[at]] = std::move(fetched[i]);
    }
  }
  result.resize(items.size());
  for (auto& [index, status] : bad_names) result[index] = std::move(status);
  return result;
}

namespace {

// A prefix or group answer: every item or the first failure.
absl::StatusOr<std::vector<Tensor>> AllOrFirstFailure(
    absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> fetched) {
  TENSORD_RETURN_IF_ERROR(fetched.status());
  std::vector<Tensor> tensors;
  tensors.reserve(fetched->size());
  for (absl::StatusOr<Tensor>& tensor : *fetched) {
    TENSORD_RETURN_IF_ERROR(tensor.status());
    tensors.push_back(*std::move(tensor));
  }
  return tensors;
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> Client::BatchFetchPrefix(absl::string_view prefix,
                                                             const FetchOptions& options,
                                                             const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  TENSORD_RETURN_IF_ERROR(ValidateNamePrefix(prefix));
  BatchSelection selection;
  selection.prefix = std::string(prefix);
  return AllOrFirstFailure(rep_->BatchFetch(selection, options, call));
}

absl::StatusOr<std::vector<Tensor>> Client::BatchFetchGroup(uint64_t group_version,
                                                            const FetchOptions& options,
                                                            const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  if (group_version == 0) {
    return absl::InvalidArgumentError("group version 0 names no group");
  }
  BatchSelection selection;
  selection.group_version = group_version;
  return AllOrFirstFailure(rep_->BatchFetch(selection, options, call));
}

absl::StatusOr<std::vector<Tensor>> Client::BatchFetchClusterGroup(uint64_t cluster_group,
                                                                   const FetchOptions& options,
                                                                   const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  if (cluster_group == 0) {
    return absl::InvalidArgumentError("cluster group 0 names no group");
  }
  BatchSelection selection;
  selection.cluster_group = cluster_group;
  return AllOrFirstFailure(rep_->BatchFetch(selection, options, call));
}

absl::StatusOr<SealGroupResult> Client::SealGroup(
    std::span<const std::unique_ptr<TensorWriter>> writers, bool send_crc32c,
    const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<LocalTransport> local,
                           rep_->transports.LocalOnly(RoutedCall{.kind = CallKind::kSealGroup}));
  TENSORD_RETURN_IF_ERROR(CheckNotCancelled(call, "SealGroup"));
  return local->SealGroup(writers, send_crc32c);
}

absl::StatusOr<SnapshotResult> Client::Snapshot(const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  return rep_->transports.remote().Snapshot(call);
}

absl::StatusOr<ClusterMembers> Client::ClusterNodes(const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  return rep_->transports.remote().ClusterNodes(call);
}

absl::StatusOr<std::string> Client::Health(absl::string_view service, const CallOptions& call) {
  TENSORD_RETURN_IF_ERROR(ValidateCallOptions(call));
  return rep_->transports.remote().Health(service, call);
}

bool Client::local() const { return rep_->transports.Local().ok(); }

}  // namespace tensord
