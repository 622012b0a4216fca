// Lists the names in a directory, through an fd that ThreadSanitizer sees
// being made.
#ifndef TENSORD_SERVICE_COMMON_DIRECTORY_ENTRIES_H_
#define TENSORD_SERVICE_COMMON_DIRECTORY_ENTRIES_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tensord {

// Calls `visit` with each entry's name except "." and "..", until it returns
// false. The directory is opened with open(2) and read with fdopendir(3):
// TSan's opendir(3) does not record the fd it makes, so closing it looked
// like a race with whichever thread last held that fd number (gRPC's
// closes are hidden from TSan by tests/tsan.supp). Fails naming `path` when
// the directory cannot be opened.
absl::Status ForEachDirectoryEntry(const std::string& path,
                                   absl::FunctionRef<bool(absl::string_view name)> visit);

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_DIRECTORY_ENTRIES_H_
