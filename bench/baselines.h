// What the machine allows, measured in the same run as tensord: memcpy
// bandwidth and a raw TCP stream over 127.0.0.1. (The empty gRPC call is in
// empty_server.h.)
#ifndef TENSORD_BENCH_BASELINES_H_
#define TENSORD_BENCH_BASELINES_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "bench/measure.h"
#include "service/common/scoped_fd.h"

namespace tensord::bench {

// Seconds for one single-threaded memcpy of `bytes` from `source` to
// `destination` (both pre-faulted and at least `bytes` long).
double TimeMemcpy(const Buffer& source, Buffer& destination, uint64_t bytes);
// Seconds to map `bytes` of new anonymous memory (THP advised, as the
// client's receive buffers are), write one byte per 4 KiB page and unmap
// it: the kernel zero-fills every page, and on a VM that hands freed memory
// back to the host (virtio-balloon free page reporting) the host backs it
// again first.
absl::StatusOr<double> TimeFirstTouch(uint64_t bytes);

// A TCP connection over 127.0.0.1 with a sender thread at one end. Each
// Transfer() is a request/response like a fetch: the receiver asks for N
// bytes (an 8-byte request), the sender answers with N bytes from `source`
// in 1 MiB send() calls, and the receiver recv()s them in 1 MiB calls into
// `destination`. Both buffers must outlive the link.
class RawTcpLink {
 public:
  static absl::StatusOr<std::unique_ptr<RawTcpLink>> Open(const Buffer& source,
                                                          Buffer& destination);
  ~RawTcpLink();
  RawTcpLink(const RawTcpLink&) = delete;
  RawTcpLink& operator=(const RawTcpLink&) = delete;

  // Seconds from sending the request to the last byte received.
  absl::StatusOr<double> Transfer(uint64_t bytes);

 private:
  RawTcpLink(const Buffer& source, Buffer& destination)
      : source_(source), destination_(destination) {}
  void Serve(ScopedFd listener);

  const Buffer& source_;
  Buffer& destination_;
  ScopedFd connection_;  // the receiver's end
  std::thread sender_;
};

}  // namespace tensord::bench

#endif  // TENSORD_BENCH_BASELINES_H_
