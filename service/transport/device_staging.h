// Streams a device version's bytes through two pinned host buffers: while
// the device stream copies one buffer, the network side fills or drains the
// other. Talks to the DeviceBackend interface only, never to CUDA.
#ifndef TENSORD_SERVICE_TRANSPORT_DEVICE_STAGING_H_
#define TENSORD_SERVICE_TRANSPORT_DEVICE_STAGING_H_

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "service/device/device_backend.h"

namespace tensord {

// Host-to-device writer for a put: Append() the bytes in order, then
// Finish() before publishing. Destruction waits for queued copies, so the
// staging buffers and the destination may be freed right after.
class DeviceUpload {
 public:
  // `staging_bytes` > 0 per pinned buffer; both are allocated here.
  static absl::StatusOr<std::unique_ptr<DeviceUpload>> Create(DeviceBackend& backend,
                                                              DeviceMemory& destination,
                                                              uint64_t staging_bytes);
  ~DeviceUpload();
  DeviceUpload(const DeviceUpload&) = delete;
  DeviceUpload& operator=(const DeviceUpload&) = delete;

  // Copies `bytes` into staging; a full buffer is queued to the device.
  // OUT_OF_RANGE past the end of the destination.
  absl::Status Append(std::span<const uint8_t> bytes);
  // Queues the last partial buffer and waits until every byte is on the device.
  absl::Status Finish();

 private:
  DeviceUpload(DeviceBackend& backend, DeviceMemory& destination)
      : backend_(backend), destination_(destination) {}
  absl::Status QueueCurrent();

  DeviceBackend& backend_;
  DeviceMemory& destination_;
  std::unique_ptr<DeviceStream> stream_;
  std::array<std::unique_ptr<PinnedBuffer>, 2> staging_;
  bool copies_queued_ = false;  // the stream may still read a staging buffer
  int current_ = 0;             // the buffer being filled
  uint64_t filled_ = 0;         // bytes in it
  uint64_t written_ = 0;        // destination bytes queued so far
};

// Device-to-host reader for a fetch: Queue() up to two ranges ahead, then
// Take() them in order. A taken range's bytes stay valid until the range
// after the next one is queued. Destruction waits for queued copies.
class DeviceDownload {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceDownload>> Create(DeviceBackend& backend,
                                                                const DeviceMemory& source,
                                                                uint64_t staging_bytes);
  ~DeviceDownload();
  DeviceDownload(const DeviceDownload&) = delete;
  DeviceDownload& operator=(const DeviceDownload&) = delete;

  uint64_t staging_bytes() const { return staging_[0]->size(); }
  // Queues the copy of [offset, offset + size), size <= staging_bytes().
  // FAILED_PRECONDITION when two ranges are already queued.
  absl::Status Queue(uint64_t offset, uint64_t size);
  // Waits for the oldest queued range and returns its bytes.
  absl::StatusOr<std::span<const uint8_t>> Take();

 private:
  DeviceDownload(DeviceBackend& backend, const DeviceMemory& source)
      : backend_(backend), source_(source) {}

  struct QueuedRange {
    int buffer = 0;
    uint64_t size = 0;
  };
  DeviceBackend& backend_;
  const DeviceMemory& source_;
  std::unique_ptr<DeviceStream> stream_;
  std::array<std::unique_ptr<PinnedBuffer>, 2> staging_;
  std::deque<QueuedRange> queued_;  // at most 2
  int next_buffer_ = 0;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_TRANSPORT_DEVICE_STAGING_H_
