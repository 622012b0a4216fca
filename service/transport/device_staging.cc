#include "service/transport/device_staging.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"

namespace tensord {

absl::StatusOr<std::unique_ptr<DeviceUpload>> DeviceUpload::Create(DeviceBackend& backend,
                                                                   DeviceMemory& destination,
                                                                   uint64_t staging_bytes) {
  std::unique_ptr<DeviceUpload> upload(new DeviceUpload(backend, destination));
  TENSORD_ASSIGN_OR_RETURN(upload->stream_, backend.CreateStream(destination.device()));
  for (std::unique_ptr<PinnedBuffer>& buffer : upload->staging_) {
    TENSORD_ASSIGN_OR_RETURN(buffer, backend.AllocatePinned(staging_bytes));
  }
  return upload;
}

DeviceUpload::~DeviceUpload() {
  // A queued copy still reads a staging buffer and writes the destination.
  if (copies_queued_) (void)stream_->Synchronize();
}

absl::Status DeviceUpload::Append(std::span<const uint8_t> bytes) {
  const uint64_t capacity = staging_[current_]->size();
  while (!bytes.empty()) {
    const uint64_t size = std::min<uint64_t>(capacity - filled_, bytes.size());
    std::memcpy(static_cast<uint8_t*>(staging_[current_]->data()) + filled_, bytes.data(), size);
    filled_ += size;
    bytes = bytes.subspan(size);
    if (filled_ == capacity) TENSORD_RETURN_IF_ERROR(QueueCurrent());
  }
  return absl::OkStatus();
}

absl::Status DeviceUpload::QueueCurrent() {
  if (filled_ == 0) return absl::OkStatus();
  TENSORD_RETURN_IF_ERROR(backend_.CopyHostToDevice(
      destination_, written_, staging_[current_]->data(), filled_, stream_.get()));
  written_ += filled_;
  filled_ = 0;
  // The other buffer is refilled next; its earlier copy must be done first.
  // Synchronizing waits for both, which is all a stream offers.
  current_ ^= 1;
  if (copies_queued_ && written_ > staging_[0]->size()) {
    TENSORD_RETURN_IF_ERROR(stream_->Synchronize());
  }
  copies_queued_ = true;
  return absl::OkStatus();
}

absl::Status DeviceUpload::Finish() {
  TENSORD_RETURN_IF_ERROR(QueueCurrent());
  if (copies_queued_) TENSORD_RETURN_IF_ERROR(stream_->Synchronize());
  copies_queued_ = false;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DeviceDownload>> DeviceDownload::Create(DeviceBackend& backend,
                                                                       const DeviceMemory& source,
                                                                       uint64_t staging_bytes) {
  std::unique_ptr<DeviceDownload> download(new DeviceDownload(backend, source));
  TENSORD_ASSIGN_OR_RETURN(download->stream_, backend.CreateStream(source.device()));
  for (std::unique_ptr<PinnedBuffer>& buffer : download->staging_) {
    TENSORD_ASSIGN_OR_RETURN(buffer, backend.AllocatePinned(staging_bytes));
  }
  return download;
}

DeviceDownload::~DeviceDownload() {
  if (!queued_.empty()) (void)stream_->Synchronize();
}

absl::Status DeviceDownload::Queue(uint64_t offset, uint64_t size) {
  if (queued_.size() == staging_.size() || size > staging_bytes()) {
    return absl::FailedPreconditionError(
        absl::StrCat("device download cannot queue ", size, " bytes with ", queued_.size(),
                     " ranges queued and ", staging_bytes(), "-byte staging buffers"));
  }
  TENSORD_RETURN_IF_ERROR(backend_.CopyDeviceToHost(staging_[next_buffer_]->data(), source_, offset,
                                                    size, stream_.get()));
  queued_.push_back(QueuedRange{.buffer = next_buffer_, .size = size});
  next_buffer_ ^= 1;
  return absl::OkStatus();
}

absl::StatusOr<std::span<const uint8_t>> DeviceDownload::Take() {
  if (queued_.empty()) return absl::FailedPreconditionError("device download has nothing queued");
  TENSORD_RETURN_IF_ERROR(stream_->Synchronize());
  const QueuedRange range = queued_.front();
  queued_.pop_front();
  return std::span<const uint8_t>(static_cast<const uint8_t*>(staging_[range.buffer]->data()),
                                  range.size);
}

}  // namespace tensord
