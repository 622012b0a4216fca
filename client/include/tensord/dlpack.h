// DLPack as tensord speaks it: Debian's libdlpack-dev header is 0.6, so the
// 1.x additions (bool and fp8/fp6/fp4 codes, the versioned managed tensor and
// its flags) are declared here from the specification when the header lacks
// them. Layouts match DLPack 1.1 exactly.
#ifndef TENSORD_CLIENT_DLPACK_H_
#define TENSORD_CLIENT_DLPACK_H_

#include <cstdint>

#include <dlpack/dlpack.h>

#ifndef DLPACK_MAJOR_VERSION
// DLPack 1.x declarations, absent from the 0.x header.
extern "C" {

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

}  // extern "C"

#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << UINT64_C(0))
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << UINT64_C(1))
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (UINT64_C(1) << UINT64_C(2))
#endif  // DLPACK_MAJOR_VERSION

namespace tensord::dlpack {

// The DLPack version tensord produces in DLManagedTensorVersioned.
inline constexpr uint32_t kProducedMajorVersion = 1;
inline constexpr uint32_t kProducedMinorVersion = 1;

// Every DLDataTypeCode up to DLPack 1.1, whatever the installed header has.
enum DataTypeCode : uint8_t {
  kInt = 0,
  kUInt = 1,
  kFloat = 2,
  kOpaqueHandle = 3,
  kBfloat = 4,
  kComplex = 5,
  kBool = 6,
  kFloat8_e3m4 = 7,
  kFloat8_e4m3 = 8,
  kFloat8_e4m3b11fnuz = 9,
  kFloat8_e4m3fn = 10,
  kFloat8_e4m3fnuz = 11,
  kFloat8_e5m2 = 12,
  kFloat8_e5m2fnuz = 13,
  kFloat8_e8m0fnu = 14,
  kFloat6_e2m3fn = 15,
  kFloat6_e3m2fn = 16,
  kFloat4_e2m1fn = 17,
};

inline constexpr uint8_t kMaxDataTypeCode = kFloat4_e2m1fn;

}  // namespace tensord::dlpack

#endif  // TENSORD_CLIENT_DLPACK_H_
