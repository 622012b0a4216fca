#include "client/src/device_import_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"

namespace tensord {

absl::StatusOr<std::unique_ptr<DeviceBackend>> DeviceImportCache::DefaultImporter(
    absl::string_view backend) {
  if (backend == "simulated") {
    SimulatedBackendOptions options;
    options.device_count = kSimulatedImporterDevices;
    return CreateSimulatedBackend(options);
  }
  if (backend == "cuda") {
    absl::StatusOr<std::unique_ptr<DeviceBackend>> cuda = CreateCudaBackend();
    if (!cuda.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "the server keeps this tensor on its cuda backend, but this process cannot import "
          "CUDA IPC handles: ",
          cuda.status().message()));
    }
    return cuda;
  }
  return absl::UnavailableError(
      absl::StrCat("the server's device backend '", backend,
                   "' is unknown to this client (known: cuda, simulated)"));
}

DeviceImportCache& DeviceImportCache::Process() {
  // Never destroyed: tensors handed to DLPack consumers may be freed by
  // exit-time destructors after static destruction began.
  static DeviceImportCache* cache = new DeviceImportCache();
  return *cache;
}

absl::StatusOr<DeviceBackend*> DeviceImportCache::Importer(absl::string_view backend) {
  MutexLock lock(&mutex_);
  auto it = importers_.find(backend);
  if (it == importers_.end()) {
    absl::StatusOr<std::unique_ptr<DeviceBackend>> made = factory_(backend);
    // Only the known names are remembered, failures included: a server
    // cannot grow this map by naming backends.
    if (!made.ok() && backend != "cuda" && backend != "simulated") return made.status();
    it = importers_.emplace(std::string(backend), std::move(made)).first;
  }
  if (!it->second.ok()) return it->second.status();
  return it->second->get();
}

absl::StatusOr<std::shared_ptr<const DeviceMemory>> DeviceImportCache::Import(
    absl::string_view server, absl::string_view backend, const ExportedHandle& handle,
    absl::string_view name, uint64_t version) {
  TENSORD_ASSIGN_OR_RETURN(DeviceBackend * importer, Importer(backend));
  // Legacy handles are keyed by their bytes: the once-per-process rule is
  // per handle. The server's identity keeps two servers apart.
  std::string key = absl::StrCat(server, "|", backend, "|", HandleKindName(handle.kind), "|",
                                 handle.kind == HandleKind::kLegacyIpc
                                     ? handle.bytes
                                     : absl::StrCat("version ", version, " of ", name));
  MutexLock lock(&mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    // Opened under the lock: a concurrent Import of the same handle waits
    // here rather than opening it a second time (which CUDA refuses).
    // Fetched device tensors are the stored version itself: mapped so that a
    // consumer's write faults where the backend allows (not legacy IPC).
    TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<ImportedMemory> memory,
                             importer->Import(handle, ImportAccess::kReadOnly));
    ++imports_opened_;
    it = entries_.emplace(key, Entry{.memory = std::move(memory)}).first;
  }
  // A hit must be the very allocation the handle describes.
  const DeviceMemory& open = *it->second.memory;
  if (open.device() != handle.device || open.size() != handle.size) {
    return absl::FailedPreconditionError(
        absl::StrCat("the cached import for this handle covers ", open.size(), " bytes on device ",
                     open.device(), ", but the handle describes ", handle.size, " bytes on device ",
                     handle.device));
  }
  ++it->second.references;
  // Each caller gets its own pointer whose deleter drops one reference.
  return std::shared_ptr<const DeviceMemory>(
      it->second.memory.get(), [this, key = std::move(key)](const DeviceMemory*) { Release(key); });
}

void DeviceImportCache::Release(const std::string& key) {
  MutexLock lock(&mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  if (--it->second.references == 0) entries_.erase(it);  // closes the import
}

size_t DeviceImportCache::open_imports() const {
  MutexLock lock(&mutex_);
  return entries_.size();
}

uint64_t DeviceImportCache::imports_opened() const {
  MutexLock lock(&mutex_);
  return imports_opened_;
}

}  // namespace tensord
