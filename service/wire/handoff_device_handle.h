// ExportedHandle <-> tensord.v1.DeviceHandle: the device part of the local
// handoff wire, shared by the server (handoff_session) and the client
// (device_import_cache).
#ifndef TENSORD_SERVICE_WIRE_HANDOFF_DEVICE_HANDLE_H_
#define TENSORD_SERVICE_WIRE_HANDOFF_DEVICE_HANDLE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/common/scoped_fd.h"
#include "service/device/device_backend.h"
#include "tensord/v1/handoff.pb.h"

namespace tensord {

// This server process's random instance number (DeviceHandle.server_instance).
uint64_t ServerInstance();

// Describes `handle` (exported by the backend named `backend`) for the
// wire. The fd and the keepalive are not part of it: the session sends
// the fd as SCM_RIGHTS and keeps the keepalive with its lease or create.
void DeviceHandleToProto(const ExportedHandle& handle, absl::string_view backend,
                         v1::DeviceHandle* proto);

// The importer's ExportedHandle from the wire and the fd that came with the
// response (invalid when none came). INVALID_ARGUMENT naming the field for
// an unknown kind, a legacy handle that is not 64 bytes, a range outside
// the allocation, or an fd that was promised and missing (or vice versa).
absl::StatusOr<ExportedHandle> DeviceHandleFromProto(const v1::DeviceHandle& proto, ScopedFd fd);

}  // namespace tensord

#endif  // TENSORD_SERVICE_WIRE_HANDOFF_DEVICE_HANDLE_H_
