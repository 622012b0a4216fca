#include "service/snapshot/snapshot_store.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "service/common/directory_entries.h"
#include "service/common/errno_status.h"
#include "service/common/log.h"
#include "service/common/mapped_file.h"
#include "service/common/scoped_fd.h"
#include "service/common/status_macros.h"
#include "service/snapshot/snapshot_format.h"

namespace tensord {
namespace {

constexpr char kSnapshotFileName[] = "tensord.snapshot";
constexpr char kLockFileName[] = ".tensord.lock";

absl::Status LastError(absl::string_view call, absl::string_view path) {
  const int error = errno;
  return ErrnoStatus(error, absl::StrCat(call, " ", path));
}

// Writes all of `bytes` at `offset`, retrying short writes and EINTR.
absl::Status WriteAt(int fd, const void* bytes, uint64_t size, uint64_t offset,
                     const std::string& path) {
  const auto* data = static_cast<const uint8_t*>(bytes);
  while (size > 0) {
    const size_t step = static_cast<size_t>(std::min<uint64_t>(size, uint64_t{1} << 30));
    const ssize_t written = ::pwrite(fd, data, step, static_cast<off_t>(offset));
    if (written < 0) {
      if (errno == EINTR) continue;
      return LastError("write", path);
    }
    data += written;
    size -= static_cast<uint64_t>(written);
    offset += static_cast<uint64_t>(written);
  }
  return absl::OkStatus();
}

absl::Status FsyncDirectory(const std::string& directory) {
  ScopedFd fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return LastError("open", directory);
  if (::fsync(fd.get()) != 0) return LastError("fsync", directory);
  return absl::OkStatus();
}

absl::string_view BytesOf(const MappedFile& file) {
  return absl::string_view(file.bytes().data(), file.bytes().size());
}

absl::Status PublishRestored(Registry& registry, absl::string_view file,
                             const SnapshotEntry& entry) {
  TENSORD_ASSIGN_OR_RETURN(
      PendingVersion pending,
      registry.Prepare(entry.name, entry.layout, entry.total_bytes, entry.retention));
  if (entry.total_bytes > 0) {
    TENSORD_RETURN_IF_ERROR(
        pending.buffer->Write(0, file.data() + entry.data_offset, entry.total_bytes));
  }
  pending.crc32c = entry.crc32c;  // verified against these very bytes just before
  pending.restored_version = entry.version;
  pending.created_at = absl::FromUnixNanos(entry.created_unix_nanos);
  pending.origin = entry.origin;
  return registry.Publish(std::move(pending)).status();
}

// RESOURCE_EXHAUSTED naming the numbers when `entries` do not all fit the
// registry's byte and tensor limits.
absl::Status CheckFits(const Registry& registry, const std::vector<const SnapshotEntry*>& entries,
                       const std::string& path) {
  uint64_t bytes = 0;
  for (const SnapshotEntry* entry : entries) bytes += entry->total_bytes;
  const uint64_t limit = registry.host_bytes_limit();
  const uint64_t free_bytes = limit - std::min(registry.host_bytes_used(), limit);
  const uint64_t held = registry.tensor_count();
  const uint64_t free_names = registry.max_tensors() - std::min(held, registry.max_tensors());
  if (bytes <= free_bytes && entries.size() <= free_names) return absl::OkStatus();
  Log(LogLevel::kError, "snapshot_too_large",
      {{"file", path},
       {"tensors", entries.size()},
       {"bytes", bytes},
       {"max_host_bytes", registry.host_bytes_limit()},
       {"max_tensors", registry.max_tensors()}});
  return absl::ResourceExhaustedError(absl::StrCat(
      "snapshot ", path, " holds ", entries.size(), " tensors of ", bytes,
      " bytes, but --max-host-bytes ", registry.host_bytes_limit(), " leaves room for ", free_bytes,
      " bytes and --max-tensors ", registry.max_tensors(), " for ", free_names,
      " tensors; nothing was restored (raise the limits, or start with "
      "--snapshot-ignore-corrupt to load what fits)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SnapshotStore>> SnapshotStore::Open(std::string directory) {
  const std::string lock_path = absl::StrCat(directory, "/", kLockFileName);
  ScopedFd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock.valid()) return LastError("open", lock_path);
  // flock, not fcntl locks: those are per process, so a second store in the
  // same process (or a closed duplicate fd) would silently share or drop it.
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("snapshot directory ", directory, " is in use by another tensord (",
                       lock_path, " is locked); give each server its own --snapshot-dir"));
    }
    return LastError("flock", lock_path);
  }
  return std::unique_ptr<SnapshotStore>(new SnapshotStore(std::move(directory), std::move(lock)));
}

SnapshotStore::SnapshotStore(std::string directory, ScopedFd lock)
    : directory_(std::move(directory)), lock_(std::move(lock)) {}

std::string SnapshotStore::snapshot_path() const {
  return absl::StrCat(directory_, "/", kSnapshotFileName);
}

absl::StatusOr<SnapshotSummary> SnapshotStore::Write(const Registry& registry) {
  MutexLock lock(&write_mutex_);
  const absl::Time start = absl::Now();
  std::vector<Lease> leases = registry.AcquireDurable();
  // Read after the leases, so it exceeds every leased version.
  const uint64_t next_version = registry.next_version();
  std::vector<SnapshotEntry> entries;
  entries.reserve(leases.size());
  SnapshotSummary summary{.path = snapshot_path()};
  for (const Lease& lease : leases) {
    entries.push_back(SnapshotEntry{.name = lease->name,
                                    .version = lease->version,
                                    .created_unix_nanos = absl::ToUnixNanos(lease->created),
                                    .retention = lease->retention,
                                    .layout = lease->layout,
                                    .total_bytes = lease->total_bytes,
                                    .crc32c = lease->crc32c,
                                    .origin = lease->origin.load(std::memory_order_relaxed)});
    summary.total_bytes += lease->total_bytes;
  }
  const std::string prefix = EncodeSnapshotPrefix(entries, next_version);

  // A fresh name (O_EXCL, random suffix, mode 0600): never a file someone
  // else is writing, whatever the pid is (1 in containers).
  std::string temporary = absl::StrCat(summary.path, ".tmp.XXXXXX");
  {
    ScopedFd fd(::mkostemp(temporary.data(), O_CLOEXEC));
    if (!fd.valid()) return LastError("mkostemp", temporary);
    absl::Status written = WriteAt(fd.get(), prefix.data(), prefix.size(), 0, temporary);
    for (size_t i = 0; written.ok() && i < entries.size(); ++i) {
      written = WriteAt(fd.get(), leases[i]->buffer->data(), entries[i].total_bytes,
                        entries[i].data_offset, temporary);
    }
    // Padding before a zero-byte last tensor is a hole pwrite never makes.
    const uint64_t file_bytes = SnapshotFileBytes(entries, prefix.size());
    if (written.ok() && ::ftruncate(fd.get(), static_cast<off_t>(file_bytes)) != 0) {
      written = LastError("ftruncate", temporary);
    }
    if (written.ok() && ::fsync(fd.get()) != 0) written = LastError("fsync", temporary);
    if (!written.ok()) {
      ::unlink(temporary.c_str());
      return written;
    }
  }
  if (::rename(temporary.c_str(), summary.path.c_str()) != 0) {
    absl::Status renamed = LastError("rename to " + summary.path, temporary);
    ::unlink(temporary.c_str());
    return renamed;
  }
  TENSORD_RETURN_IF_ERROR(FsyncDirectory(directory_));
  summary.tensor_count = entries.size();
  Log(LogLevel::kInfo, "snapshot_written",
      {{"file", summary.path},
       {"tensors", summary.tensor_count},
       {"bytes", summary.total_bytes},
       {"duration", absl::FormatDuration(absl::Now() - start)}});
  return summary;
}

void SnapshotStore::RemoveStaleTemporaries() const {
  const std::string prefix = absl::StrCat(kSnapshotFileName, ".tmp.");
  // Bounded: a directory of ours holds a handful of files.
  int seen = 0;
  (void)ForEachDirectoryEntry(directory_, [&](absl::string_view name) {
    if (absl::StartsWith(name, prefix)) {
      const std::string path = absl::StrCat(directory_, "/", name);
      std::error_code removed;
      std::filesystem::remove(path, removed);
      Log(LogLevel::kWarning, "snapshot_stale_temporary_removed",
          {{"file", path}, {"error", removed.message()}});
    }
    return ++seen < 10'000;
  });
}

absl::StatusOr<RestoreSummary> SnapshotStore::Restore(Registry& registry,
                                                      CorruptSnapshotPolicy policy) {
  // A snapshot interrupted by a crash left its temporary file behind.
  RemoveStaleTemporaries();
  RestoreSummary summary{.path = snapshot_path()};
  struct stat st;
  if (::stat(summary.path.c_str(), &st) != 0 && errno == ENOENT) {
    Log(LogLevel::kInfo, "snapshot_absent", {{"file", summary.path}});
    return summary;
  }
  summary.found = true;
  // Sets the damaged file aside so the next snapshot does not erase the
  // evidence, when the policy lets the server start anyway.
  auto set_aside = [&] {
    const std::string aside = summary.path + ".corrupt";
    if (::rename(summary.path.c_str(), aside.c_str()) == 0) {
      Log(LogLevel::kError, "snapshot_set_aside", {{"file", summary.path}, {"moved_to", aside}});
    }
  };

  std::unique_ptr<MappedFile> file;
  absl::StatusOr<SnapshotContents> contents;
  if (absl::StatusOr<std::unique_ptr<MappedFile>> opened = MappedFile::Open(summary.path);
      opened.ok()) {
    file = std::move(*opened);
    contents = ParseSnapshot(BytesOf(*file));
  } else {
    contents = opened.status();
  }
  if (!contents.ok()) {
    Log(LogLevel::kError, "snapshot_corrupt",
        {{"file", summary.path}, {"reason", contents.status().message()}});
    if (policy == CorruptSnapshotPolicy::kRefuse) {
      return absl::DataLossError(absl::StrCat("snapshot ", summary.path, " is unusable (",
                                              contents.status().message(),
                                              "); nothing was restored"));
    }
    summary.corrupt = 1;
    set_aside();
    return summary;
  }

  std::vector<const SnapshotEntry*> valid;
  std::string first_problem;
  for (const SnapshotEntry& entry : contents->entries) {
    if (absl::Status verified = VerifySnapshotEntry(BytesOf(*file), entry); !verified.ok()) {
      Log(LogLevel::kError, "snapshot_tensor_corrupt",
          {{"file", summary.path},
           {"name", entry.name},
           {"version", entry.version},
           {"reason", verified.message()}});
      if (first_problem.empty()) first_problem = std::string(verified.message());
      ++summary.corrupt;
      continue;
    }
    valid.push_back(&entry);
  }
  if (summary.corrupt > 0 && policy == CorruptSnapshotPolicy::kRefuse) {
    return absl::DataLossError(absl::StrCat("snapshot ", summary.path, " has ", summary.corrupt,
                                            " damaged tensor(s), first: ", first_problem,
                                            "; nothing was restored"));
  }
  // Versions are published in increasing order, as they were made.
  std::sort(valid.begin(), valid.end(),
            [](const SnapshotEntry* a, const SnapshotEntry* b) { return a->version < b->version; });
  if (policy == CorruptSnapshotPolicy::kRefuse) {
    // Refused before the first publish, so a lowered limit never leaves a
    // half-loaded registry.
    TENSORD_RETURN_IF_ERROR(CheckFits(registry, valid, summary.path));
  }
  for (const SnapshotEntry* entry : valid) {
    if (absl::Status published = PublishRestored(registry, BytesOf(*file), *entry);
        !published.ok()) {
      if (policy == CorruptSnapshotPolicy::kRefuse) {
        return absl::Status(published.code(),
                            absl::StrCat("restoring tensor '", entry->name, "' from ", summary.path,
                                         ": ", published.message()));
      }
      // The file is intact and stays, but the next snapshot replaces it
      // without this tensor.
      Log(LogLevel::kError, "snapshot_tensor_skipped",
          {{"file", summary.path},
           {"name", entry->name},
           {"version", entry->version},
           {"bytes", entry->total_bytes},
           {"reason", published.message()}});
      ++summary.skipped;
      continue;
    }
    ++summary.restored;
  }
  // Numbers on from the highest ever issued, not the highest restored.
  registry.AdvanceNextVersion(contents->next_version);
  if (summary.corrupt > 0) set_aside();
  Log(summary.corrupt > 0 ? LogLevel::kError : LogLevel::kInfo, "snapshot_restored",
      {{"file", summary.path},
       {"tensors", summary.restored},
       {"corrupt", summary.corrupt},
       {"skipped", summary.skipped}});
  return summary;
}

}  // namespace tensord
