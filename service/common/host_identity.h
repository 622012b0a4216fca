// Who and where this process is, as far as local handoff cares.
#ifndef TENSORD_SERVICE_COMMON_HOST_IDENTITY_H_
#define TENSORD_SERVICE_COMMON_HOST_IDENTITY_H_

#include <string>

namespace tensord {

// The kernel's boot id (/proc/sys/kernel/random/boot_id): equal in two
// processes exactly when they run on the same host (and boot). Empty when
// unreadable.
const std::string& BootId();

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_HOST_IDENTITY_H_
