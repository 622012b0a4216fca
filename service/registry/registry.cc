#include "absl/strings/string_view.h"
#include "service/registry/registry.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "service/common/crc32c.h"
#include "service/common/status_macros.h"
#include "service/registry/tensor_name.h"

namespace tensord {
namespace {

constexpr uint32_t kDefaultPageSize = 100;
constexpr uint32_t kMaxPageSize = 1000;

std::string EncodePageToken(absl::string_view last_name) {
  return absl::WebSafeBase64Escape(last_name);
}

absl::StatusOr<std::string> DecodePageToken(absl::string_view token) {
  std::string last_name;
  if (!absl::WebSafeBase64Unescape(token, &last_name) || !ValidateTensorName(last_name).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_token '", absl::CHexEscape(token.substr(0, 100)),
                     "' is not a token from an earlier List response"));
  }
  return last_name;
}

}  // namespace

VersionInfo InfoOf(const TensorVersion& version) {
  return VersionInfo{
      .name = version.name,
      .version = version.version,
      .layout = version.layout,
      .total_bytes = version.total_bytes,
      .crc32c = version.crc32c,
      .created = version.created,
      .open_leases = version.open_leases.load(std::memory_order_relaxed),
  };
}

Registry::Registry(const RegistryOptions& options)
    : options_(options),
      host_capacity_(CapacityAccount::Create(options.max_host_bytes,
                                             "host memory (--max-host-bytes)")) {}

absl::StatusOr<PendingVersion> Registry::Prepare(std::string name, dlpack::TensorLayout layout,
                                                 uint64_t total_bytes) {
  PendingVersion pending;
  TENSORD_ASSIGN_OR_RETURN(pending.reservation, host_capacity_->Reserve(total_bytes));
  TENSORD_ASSIGN_OR_RETURN(pending.buffer,
                           HostBuffer::Create(total_bytes, name, options_.page_policy));
  pending.name = std::move(name);
  pending.layout = std::move(layout);
  pending.total_bytes = total_bytes;
  return pending;
}

absl::StatusOr<VersionInfo> Registry::Publish(PendingVersion pending,
                                              std::optional<uint32_t> expected_crc32c) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(pending.name));
  if (pending.buffer == nullptr || pending.buffer->size() != pending.total_bytes) {
    return absl::InternalError(absl::StrCat("publish of '", pending.name,
                                            "' without a buffer of ", pending.total_bytes, " bytes"));
  }
  TENSORD_RETURN_IF_ERROR(dlpack::ValidateLayoutFits(pending.layout, pending.total_bytes));
  if (pending.reservation.bytes() < pending.total_bytes) {
    return absl::InternalError(absl::StrCat("publish of '", pending.name, "' reserved only ",
                                            pending.reservation.bytes(), " of ",
                                            pending.total_bytes, " bytes"));
  }
  // Sealed before checksumming: a local producer still holding the memfd
  // could otherwise change bytes after they were summed.
  TENSORD_RETURN_IF_ERROR(pending.buffer->Seal());
  uint32_t crc = pending.crc32c.has_value()
                     ? *pending.crc32c
                     : Crc32c(pending.buffer->data(), pending.buffer->size());
  if (expected_crc32c.has_value() && *expected_crc32c != crc) {
    return absl::DataLossError(absl::StrCat("crc32c of the bytes of '", pending.name, "' is ", crc,
                                            " but the producer declared ", *expected_crc32c));
  }

  auto version = std::make_shared<TensorVersion>();
  version->name = std::move(pending.name);
  version->layout = std::move(pending.layout);
  version->total_bytes = pending.total_bytes;
  version->crc32c = crc;
  version->created = absl::Now();
  version->buffer = std::move(pending.buffer);
  version->reservation = std::move(pending.reservation);

  MutexLock lock(&mutex_);
  auto it = latest_.find(version->name);
  if (it == latest_.end() && latest_.size() >= options_.max_tensors) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot add tensor '", version->name, "': the registry holds ", latest_.size(),
        " tensors, the limit (--max-tensors) is ", options_.max_tensors));
  }
  version->version = ++last_version_;
  VersionInfo info = InfoOf(*version);
  if (it == latest_.end()) {
    latest_.emplace(version->name, std::move(version));
  } else {
    RetireLocked(std::exchange(it->second, std::move(version)));
  }
  return info;
}

void Registry::RetireLocked(std::shared_ptr<const TensorVersion> version) {
  // Only readers can keep a retired version alive; when none does, it goes now.
  if (version.use_count() > 1) retired_.emplace(version->version, version);
  // Prune entries whose readers are gone, amortised over retirements.
  if (retired_.size() > 64) {
    absl::erase_if(retired_, [](const auto& entry) { return entry.second.expired(); });
  }
}

std::shared_ptr<const TensorVersion> Registry::FindLocked(absl::string_view name,
                                                          uint64_t version) const {
  auto it = latest_.find(name);
  if (it != latest_.end() && (version == 0 || it->second->version == version)) return it->second;
  if (version == 0) return nullptr;
  auto retired = retired_.find(version);
  if (retired == retired_.end()) return nullptr;
  std::shared_ptr<const TensorVersion> found = retired->second.lock();
  if (found == nullptr || found->name != name) return nullptr;
  return found;
}

absl::StatusOr<Lease> Registry::Acquire(absl::string_view name, uint64_t version) const {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  ReaderMutexLock lock(&mutex_);
  std::shared_ptr<const TensorVersion> found = FindLocked(name, version);
  if (found == nullptr) return NotFoundLocked(name, version);
  return Lease(std::move(found));
}

absl::StatusOr<VersionInfo> Registry::Stat(absl::string_view name, uint64_t version) const {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  ReaderMutexLock lock(&mutex_);
  std::shared_ptr<const TensorVersion> found = FindLocked(name, version);
  if (found == nullptr) return NotFoundLocked(name, version);
  return InfoOf(*found);
}

absl::StatusOr<ListPage> Registry::List(absl::string_view prefix, uint32_t page_size,
                                        absl::string_view page_token) const {
  TENSORD_RETURN_IF_ERROR(ValidateNamePrefix(prefix));
  if (page_size > kMaxPageSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size ", page_size, " exceeds the limit of ", kMaxPageSize));
  }
  if (page_size == 0) page_size = kDefaultPageSize;
  std::string after;
  if (!page_token.empty()) {
    TENSORD_ASSIGN_OR_RETURN(after, DecodePageToken(page_token));
  }
  ListPage page;
  ReaderMutexLock lock(&mutex_);
  // Resume after the token's name, but never before the prefix range.
  auto it = (!after.empty() && after >= prefix) ? latest_.upper_bound(after)
                                                : latest_.lower_bound(prefix);
  for (; it != latest_.end() && absl::StartsWith(it->first, prefix); ++it) {
    if (page.tensors.size() == page_size) {
      page.next_page_token = EncodePageToken(page.tensors.back().name);
      break;
    }
    page.tensors.push_back(InfoOf(*it->second));
  }
  return page;
}

absl::StatusOr<uint64_t> Registry::Delete(absl::string_view name, uint64_t expected_version) {
  TENSORD_RETURN_IF_ERROR(ValidateTensorName(name));
  MutexLock lock(&mutex_);
  auto it = latest_.find(name);
  if (it == latest_.end()) return absl::NotFoundError(absl::StrCat("tensor '", name, "' not found"));
  uint64_t latest = it->second->version;
  if (expected_version != 0 && expected_version != latest) {
    return absl::FailedPreconditionError(absl::StrCat("tensor '", name, "' is at version ", latest,
                                                      ", not the expected version ",
                                                      expected_version));
  }
  std::shared_ptr<const TensorVersion> removed = std::move(it->second);
  latest_.erase(it);
  RetireLocked(std::move(removed));
  return latest;
}

absl::Status Registry::NotFoundLocked(absl::string_view name, uint64_t version) const {
  if (version == 0) return absl::NotFoundError(absl::StrCat("tensor '", name, "' not found"));
  auto latest = latest_.find(name);
  return absl::NotFoundError(absl::StrCat(
      "version ", version, " of tensor '", name, "' not found",
      latest == latest_.end() ? std::string()
                              : absl::StrCat(" (latest is ", latest->second->version, ")")));
}

RegistryStats Registry::Stats() const {
  RegistryStats stats;
  auto count = [&stats](const TensorVersion& version) {
    ++stats.versions;
    stats.stored_bytes += version.total_bytes;
    stats.open_leases += version.open_leases.load(std::memory_order_relaxed);
  };
  ReaderMutexLock lock(&mutex_);
  stats.tensors = latest_.size();
  for (const auto& [name, version] : latest_) count(*version);
  for (const auto& [number, weak] : retired_) {
    if (std::shared_ptr<const TensorVersion> version = weak.lock()) count(*version);
  }
  return stats;
}

size_t Registry::tensor_count() const {
  ReaderMutexLock lock(&mutex_);
  return latest_.size();
}

}  // namespace tensord
