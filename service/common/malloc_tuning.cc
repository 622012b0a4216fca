#include "service/common/malloc_tuning.h"

#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tensord {

void KeepFreedHeapForTransfers() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] { ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(kKeptFreeHeapBytes)); });
#endif
}

}  // namespace tensord
