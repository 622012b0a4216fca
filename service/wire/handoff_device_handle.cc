#include "service/wire/handoff_device_handle.h"

#include <random>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tensord {

uint64_t ServerInstance() {
  static const uint64_t instance = [] {
    std::random_device device;
    return (uint64_t{device()} << 32) ^ device();
  }();
  return instance;
}

void DeviceHandleToProto(const ExportedHandle& handle, absl::string_view backend,
                         v1::DeviceHandle* proto) {
  proto->set_backend(std::string(backend));
  proto->set_server_instance(ServerInstance());
  proto->set_kind(handle.kind == HandleKind::kPosixFd ? v1::DEVICE_HANDLE_KIND_POSIX_FD
                                                      : v1::DEVICE_HANDLE_KIND_LEGACY_IPC);
  proto->set_device(handle.device);
  proto->set_legacy_ipc_handle(handle.kind == HandleKind::kLegacyIpc ? handle.bytes : "");
  proto->set_offset(handle.offset);
  proto->set_size(handle.size);
  proto->set_allocation_size(handle.allocation_size);
  proto->set_fd_attached(handle.fd.valid());
}

absl::StatusOr<ExportedHandle> DeviceHandleFromProto(const v1::DeviceHandle& proto, ScopedFd fd) {
  ExportedHandle handle;
  switch (proto.kind()) {
    case v1::DEVICE_HANDLE_KIND_LEGACY_IPC:
      if (proto.legacy_ipc_handle().size() != kLegacyIpcHandleBytes) {
        return absl::InvalidArgumentError(absl::StrCat("device_handle.legacy_ipc_handle has ",
                                                       proto.legacy_ipc_handle().size(),
                                                       " bytes, not ", kLegacyIpcHandleBytes));
      }
      handle.kind = HandleKind::kLegacyIpc;
      handle.bytes = proto.legacy_ipc_handle();
      break;
    case v1::DEVICE_HANDLE_KIND_POSIX_FD:
      if (!proto.fd_attached()) {
        return absl::InvalidArgumentError("device_handle of kind posix-fd has no fd attached");
      }
      handle.kind = HandleKind::kPosixFd;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("device_handle.kind ", static_cast<int>(proto.kind()), " is unknown"));
  }
  if (proto.fd_attached() != fd.valid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device_handle.fd_attached is ", proto.fd_attached() ? "true" : "false",
                     " but ", fd.valid() ? "an fd" : "no fd", " came with the response"));
  }
  if (proto.device() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device_handle.device ", proto.device(), " is negative"));
  }
  if (proto.size() == 0 || proto.offset() > proto.allocation_size() ||
      proto.size() > proto.allocation_size() - proto.offset()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device_handle range of ", proto.size(), " bytes at offset ", proto.offset(),
                     " does not fit its allocation of ", proto.allocation_size(), " bytes"));
  }
  handle.device = proto.device();
  handle.offset = proto.offset();
  handle.size = proto.size();
  handle.allocation_size = proto.allocation_size();
  handle.fd = std::move(fd);
  return handle;
}

}  // namespace tensord
