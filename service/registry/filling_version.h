// A version another node is sending here, readable while it arrives: the
// first reader of a name held elsewhere is passed the bytes as the pull
// writes them instead of waiting for the whole copy (issue 27: a 256 MiB
// first read through another node was 0.25-0.36x a direct fetch).
//
// The pull announces each attempt (a holder that fails is replaced by the
// next, starting again at byte 0), advances a watermark as it writes, and
// ends in one of two ways: Complete with the sealed, summed version, or
// Fail. Until Complete a reader may send bytes below the watermark,
// but never the last byte: a reader's stream cannot end before the pull's
// CRC-32C check passed, so wrong bytes never end in an OK answer.
#ifndef TENSORD_SERVICE_REGISTRY_FILLING_VERSION_H_
#define TENSORD_SERVICE_REGISTRY_FILLING_VERSION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "service/common/mapped_file.h"
#include "service/common/mutex.h"
#include "service/memory/host_bytes.h"
#include "service/registry/tensor_version.h"

namespace tensord {

// Thread-safe.
class FillingVersion {
 public:
  // Runs once, on the thread that changed the state (or inline).
  using Wake = absl::AnyInvocable<void() &&>;

  // What a reader sees at one moment.
  struct View {
    uint64_t changes = 0;  // pass to WaitPast
    // Set once the first attempt began: name, layout, size, CRC-32C and
    // creation time as readers announce them; version 0 until Complete.
    const TensorVersion* announced = nullptr;
    // Bytes [0, readable) may be sent now (Borrow).
    uint64_t readable = 0;
    // Set by Complete: the version, its number given; read it directly.
    std::shared_ptr<const TensorVersion> complete;
    // With `complete`: bytes an abandoned attempt had written (and a reader
    // may have sent) differ from the checked copy's. A reader that sent any
    // must fail: its stream may hold them.
    bool abandoned_bytes_differed = false;
    // Set by Fail.
    std::optional<absl::Status> failed;
  };

  // Versions larger than this are passed on as they arrive; smaller ones
  // are not mapped (readers wait for Complete): their copy is quick.
  static constexpr uint64_t kPassedOnAboveBytes = 1 << 20;

  FillingVersion() = default;
  FillingVersion(const FillingVersion&) = delete;
  FillingVersion& operator=(const FillingVersion&) = delete;

  // The pull's side, from one thread; it must end in Complete or Fail
  // (readers wait until then; each holds the FillingVersion).
  // A new attempt writes into `bytes` (a memfd of their own, never a
  // spare another put may take: see Borrow) from byte 0; readers read them
  // through a read-only mapping of it, which outlives `bytes`. Without
  // that mapping (too small, or mmap failed) readers wait for Complete.
  // DATA_LOSS when an earlier attempt announced another layout, size or
  // CRC-32C (readers were told those already).
  absl::Status Begin(const VersionDescription& description, const HostBytes& bytes);
  // Bytes [0, end) of the current attempt are written.
  void Advance(uint64_t end);
  // The current attempt failed (its holder stalled, died, or sent bytes
  // that do not sum): readers stop reading it; what it had written is kept
  // to be checked against the copy that Completes.
  void Abandon();
  // The sealed version, its number given (published, or superseded: a
  // reader still gets the version its read was promised). Compares it with
  // what abandoned attempts had written first.
  void Complete(std::shared_ptr<const TensorVersion> version);
  void Fail(absl::Status status);

  // A reader's side.
  View Look() const;
  // Registers `wake` for the next change after `changes` and returns true;
  // returns false (keeping nothing) when one happened already.
  bool WaitPast(uint64_t changes, Wake& wake);
  // Bytes readable now, sent without a copy: valid while `hold` lives.
  struct Borrowed {
    const uint8_t* data = nullptr;
    std::shared_ptr<const void> hold;
  };
  // Bytes [offset, offset + size); nullopt when they are not readable.
  std::optional<Borrowed> Borrow(uint64_t offset, uint64_t size) const;

 private:
  // Moves out the waiters and counts a change; the caller wakes them.
  std::vector<Wake> ChangedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void WakeAll(std::vector<Wake> waiters);

  mutable Mutex mu_;
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<TensorVersion> announced_ ABSL_GUARDED_BY(mu_);
  // The current attempt's bytes, mapped read-only.
  std::shared_ptr<const MappedFile> mapped_ ABSL_GUARDED_BY(mu_);
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  // Abandoned attempts' bytes and how many each had written.
  std::vector<std::pair<std::shared_ptr<const MappedFile>, uint64_t>> abandoned_
      ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const TensorVersion> complete_ ABSL_GUARDED_BY(mu_);
  bool abandoned_bytes_differed_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<absl::Status> failed_ ABSL_GUARDED_BY(mu_);
  std::vector<Wake> waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_REGISTRY_FILLING_VERSION_H_
