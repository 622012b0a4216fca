// The public API: checks arguments, then hands each call to the transport
// TransportSelector picks (data calls) or to gRPC (calls only it serves).
#include "tensord/client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/src/host_tensor_source.h"
#include "client/src/transport_selector.h"
#include "service/common/status_macros.h"
#include "service/common/tensor_name.h"

namespace tensord {

struct Client::Rep {
  explicit Rep(const ClientOptions& options, std::shared_ptr<RemoteTransport> remote)
      : transports(options.path, options.handoff_socket, std::move(remote)) {}
  TransportSelector transports;
};

Client::Client(std::unique_ptr<Rep> rep) : rep_(std::move(rep)) {}
Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<RemoteTransport> remote, RemoteTransport::Connect(options));
  return std::unique_ptr<Client>(new Client(std::make_unique<Rep>(options, std::move(remote))));
}

absl::StatusOr<TensorInfo> Client::Put(absl::string_view name, const DLTensor& tensor,
                                       const PutOptions& options) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  TENSORD_RETURN_IF_ERROR(ValidateHostTensor(tensor, "tensor"));
  if (options.device.has_value()) {
    // Device puts from host memory go over gRPC (the server's staged upload);
    // a local producer writes device memory in place with Create instead.
    if (rep_->transports.path() == TransferPath::kLocal) {
      return absl::FailedPreconditionError(absl::StrCat(
          "put of '", name, "' into device memory (device type ", options.device->device_type,
          ", id ", options.device->device_id,
          ") needs TransferPath::kRemote or kAuto; on the server's host, Create with "
          "CreateOptions::device writes device memory in place"));
    }
    return rep_->transports.remote().Put(name, tensor, options);
  }
  return rep_->transports.Run(
      [&](ClientTransport& transport) { return transport.Put(name, tensor, options); });
}

absl::StatusOr<Tensor> Client::Fetch(absl::string_view name, const FetchOptions& options) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  return rep_->transports.Run(
      [&](ClientTransport& transport) { return transport.Fetch(name, options); });
}

absl::StatusOr<TensorInfo> Client::FetchInto(absl::string_view name, const DLTensor& destination,
                                             const FetchOptions& options) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  TENSORD_RETURN_IF_ERROR(ValidateHostTensor(destination, "destination"));
  return rep_->transports.Run(
      [&](ClientTransport& transport) { return transport.FetchInto(name, destination, options); });
}

absl::StatusOr<TensorInfo> Client::FetchBytes(absl::string_view name, uint64_t offset,
                                              uint64_t length, std::string& out,
                                              const FetchOptions& options) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  return rep_->transports.remote().FetchBytes(name, offset, length, out, options);
}

absl::StatusOr<TensorInfo> Client::Stat(absl::string_view name, uint64_t version) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  return rep_->transports.remote().Stat(name, version);
}

absl::StatusOr<ListResult> Client::List(absl::string_view prefix, uint32_t page_size,
                                        absl::string_view page_token) {
  return rep_->transports.remote().List(prefix, page_size, page_token);
}

absl::StatusOr<std::vector<TensorInfo>> Client::ListAll(absl::string_view prefix) {
  std::vector<TensorInfo> all;
  std::string token;
  do {
    TENSORD_ASSIGN_OR_RETURN(ListResult page, List(prefix, 1000, token));
    for (TensorInfo& info : page.tensors) all.push_back(std::move(info));
    token = std::move(page.next_page_token);
  } while (!token.empty());
  return all;
}

absl::StatusOr<uint64_t> Client::Delete(absl::string_view name, uint64_t version) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  return rep_->transports.remote().Delete(name, version);
}

absl::StatusOr<std::unique_ptr<TensorWriter>> Client::Create(absl::string_view name,
                                                             DLDataType dtype,
                                                             std::span<const int64_t> shape,
                                                             Retention retention) {
  CreateOptions options;
  options.retention = retention;
  return Create(name, dtype, shape, options);
}

absl::StatusOr<std::unique_ptr<TensorWriter>> Client::Create(absl::string_view name,
                                                             DLDataType dtype,
                                                             std::span<const int64_t> shape,
                                                             const CreateOptions& options) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  // Create/seal exists only on the handoff socket: a local failure (say, a
  // device import this process cannot make) is the answer, and gRPC's
  // Create only says that no socket was found.
  return rep_->transports.Run(
      [&](ClientTransport& transport) { return transport.Create(name, dtype, shape, options); },
      TransportSelector::Fallback::kNone);
}

absl::StatusOr<SnapshotResult> Client::Snapshot() { return rep_->transports.remote().Snapshot(); }

absl::StatusOr<std::string> Client::Health(absl::string_view service) {
  return rep_->transports.remote().Health(service);
}

bool Client::local() const {
  absl::StatusOr<std::shared_ptr<LocalTransport>> local = rep_->transports.Local();
  return local.ok() && *local != nullptr;
}

}  // namespace tensord
