// Imported device allocations, cached per process: opening an IPC handle is
// expensive and CUDA opens a legacy handle at most once per process, so every
// Client of the process shares one import of each allocation.
#ifndef TENSORD_CLIENT_SRC_DEVICE_IMPORT_CACHE_H_
#define TENSORD_CLIENT_SRC_DEVICE_IMPORT_CACHE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/common/mutex.h"
#include "service/device/device_backend.h"

namespace tensord {

// Device ordinals a simulated importer accepts. It never allocates, so the
// figure only bounds the ids of handles it opens.
inline constexpr int kSimulatedImporterDevices = 64;

// Thread-safe. An import stays open while any pointer Import() returned for
// it lives, and closes (under the cache's lock, so a later Import of the
// same handle never races the close) when the last one goes.
class DeviceImportCache {
 public:
  // Makes the importer for a server's backend name ("cuda", "simulated").
  using ImporterFactory =
      std::function<absl::StatusOr<std::unique_ptr<DeviceBackend>>(absl::string_view backend)>;

  // The default factory: a simulated backend for "simulated", the CUDA
  // backend for "cuda" (UNAVAILABLE naming why when this process cannot
  // have one: no CUDA in this build, no driver, no device), UNAVAILABLE for
  // any other name.
  static absl::StatusOr<std::unique_ptr<DeviceBackend>> DefaultImporter(absl::string_view backend);

  explicit DeviceImportCache(ImporterFactory factory = &DefaultImporter)
      : factory_(std::move(factory)) {}
  // Outstanding imports keep pointing into the cache: destroy it only after
  // them. The process-wide cache is never destroyed.
  ~DeviceImportCache() = default;
  DeviceImportCache(const DeviceImportCache&) = delete;
  DeviceImportCache& operator=(const DeviceImportCache&) = delete;

  // The one cache of this process, shared by every Client.
  static DeviceImportCache& Process();

  // The importer for `backend`, made on first use; a failure is remembered
  // (so a missing driver is not probed on every fetch). Lives as long as
  // the cache.
  absl::StatusOr<DeviceBackend*> Importer(absl::string_view backend);

  // The import of `handle` (exported by `backend` of the server known as
  // `server`), opened on first use and shared afterwards. `name` and
  // `version` identify the allocation of a handle without bytes (kPosixFd):
  // the items of an atomic group share one version number; a legacy handle
  // is identified by its bytes. `handle.fd` stays the caller's.
  absl::StatusOr<std::shared_ptr<const DeviceMemory>> Import(absl::string_view server,
                                                             absl::string_view backend,
                                                             const ExportedHandle& handle,
                                                             absl::string_view name,
                                                             uint64_t version);

  // Imports currently open, and imports opened so far (cache misses).
  size_t open_imports() const;
  uint64_t imports_opened() const;

 private:
  struct Entry {
    std::unique_ptr<ImportedMemory> memory;
    uint64_t references = 0;
  };
  void Release(const std::string& key);

  const ImporterFactory factory_;
  mutable Mutex mutex_;
  absl::flat_hash_map<std::string, absl::StatusOr<std::unique_ptr<DeviceBackend>>> importers_
      ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mutex_);
  uint64_t imports_opened_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace tensord

#endif  // TENSORD_CLIENT_SRC_DEVICE_IMPORT_CACHE_H_
