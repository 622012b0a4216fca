// Host tensor bytes in a memfd: writable while a put fills them, then sealed
// so no process, the server included, can change them again.
#ifndef TENSORD_SERVICE_MEMORY_HOST_BUFFER_H_
#define TENSORD_SERVICE_MEMORY_HOST_BUFFER_H_

#include <cstdint>
#include <memory>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "service/common/scoped_fd.h"

namespace tensord {

// Not thread-safe while writable; after Seal() every const method is.
class HostBuffer {
 public:
  // A zero-filled, writable buffer of `size` bytes. `debug_name` shows in
  // /proc/PID/fd and /proc/PID/maps as "memfd:tensord:<debug_name>".
  static absl::StatusOr<std::unique_ptr<HostBuffer>> Create(uint64_t size,
                                                            absl::string_view debug_name);
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  // Writable bytes; nullptr once sealed.
  uint8_t* mutable_data() { return sealed_ ? nullptr : data_; }
  // Never nullptr, even for size 0; 256-byte aligned (page aligned).
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  // The memfd, for handing the bytes to another process.
  int fd() const { return fd_.get(); }
  bool sealed() const { return sealed_; }

  // Drops the writable mapping, adds F_SEAL_WRITE|F_SEAL_SHRINK|F_SEAL_GROW|
  // F_SEAL_SEAL and maps the bytes read-only. Idempotent.
  absl::Status Seal();

 private:
  HostBuffer(ScopedFd fd, uint8_t* data, uint64_t size)
      : fd_(std::move(fd)), data_(data), size_(size) {}
  void Unmap();

  ScopedFd fd_;
  uint8_t* data_;
  uint64_t size_;
  bool sealed_ = false;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_MEMORY_HOST_BUFFER_H_
