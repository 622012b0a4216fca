#include "service/transport/parted_puts.h"

#include "service/transport/publish.h"

#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/common/crc32c.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/dlpack/tensor_layout.h"

namespace tensord {
namespace {

std::string DescribeRange(uint64_t offset, uint64_t length) {
  return absl::StrCat("[", offset, ", +", length, ")");
}

}  // namespace

PartedPut::PartedPut(PartedPuts& owner, std::string upload_id, ValidatedPut identity,
                     uint32_t header_replicas, const TokenGrant* grant, uint32_t replicas,
                     PendingVersion pending)
    : owner_(owner),
      upload_id_(std::move(upload_id)),
      identity_(std::move(identity)),
      header_replicas_(header_replicas),
      grant_(grant),
      replicas_(replicas),
      bytes_(pending.buffer.get()),
      pending_(std::move(pending)) {}

absl::Status PartedPut::failure() const {
  if (!failed_.load(std::memory_order_acquire)) return absl::OkStatus();
  MutexLock lock(&mutex_);
  return failure_;
}

absl::Status PartedPut::Claim(const ValidatedPut& put, uint32_t header_replicas,
                              const TokenGrant* grant) {
  const ValidatedPutPart& part = *put.part;
  const std::string what =
      absl::StrCat("part ", DescribeRange(part.offset, part.length), " of the put of '", put.name,
                   "' (upload ", upload_id_, ")");
  if (grant != grant_) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, " comes with another token than the put's first part"));
  }
  std::string differs;
  if (put.name != identity_.name)
    differs = absl::StrCat("name '", identity_.name, "'");
  else if (!(put.layout == identity_.layout))
    differs = "layout";
  else if (put.total_bytes != identity_.total_bytes)
    differs = "total_bytes";
  else if (put.crc32c != identity_.crc32c)
    differs = "crc32c";
  else if (put.retention != identity_.retention)
    differs = "retention";
  else if (header_replicas != header_replicas_)
    differs = "replicas";
  else if (part.parts != identity_.part->parts) {
    differs = absl::StrCat("part.parts (", part.parts, " here, ", identity_.part->parts, " there)");
  }
  if (!differs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " differs from the put's first part in its ", differs));
  }

  MutexLock lock(&mutex_);
  if (state_ != State::kReceiving) {
    if (failed_.load(std::memory_order_relaxed)) return failure_;
    return absl::InvalidArgumentError(
        absl::StrCat(what, " came after all ", identity_.part->parts, " parts had arrived"));
  }
  if (parts_.size() >= identity_.part->parts) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is one more than the ", identity_.part->parts, " parts announced"));
  }
  auto next = parts_.lower_bound(part.offset);
  if (next != parts_.end() && next->first - part.offset < part.length) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " overlaps part ", DescribeRange(next->first, next->second.length)));
  }
  if (next != parts_.begin()) {
    const auto previous = std::prev(next);
    if (part.offset - previous->first < previous->second.length) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " overlaps part ", DescribeRange(previous->first, previous->second.length)));
    }
  }
  parts_.emplace(part.offset, Part{part.length});
  claimed_bytes_ += part.length;
  // Without overlaps, the announced parts cover the tensor exactly when
  // their lengths add up to it.
  if (parts_.size() == identity_.part->parts && claimed_bytes_ != identity_.total_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", parts_.size(), " parts of the put of '", put.name, "' (upload ", upload_id_,
        ") cover ", claimed_bytes_, " of its ", identity_.total_bytes, " bytes"));
  }
  return absl::OkStatus();
}

void PartedPut::Touch() {
  MutexLock lock(&mutex_);
  for (Waiter& waiter : waiters_) {
    if (waiter.slot != nullptr) waiter.slot->Touch();
  }
}

std::vector<std::unique_ptr<ActiveStreams::Slot>> PartedPut::TakeSlotsLocked() {
  std::vector<std::unique_ptr<ActiveStreams::Slot>> slots;
  for (Waiter& waiter : waiters_) slots.push_back(std::move(waiter.slot));
  return slots;
}

void PartedPut::Arrived(uint64_t offset, uint32_t crc32c,
                        std::unique_ptr<ActiveStreams::Slot> waiting_slot, Answer answer) {
  // The last answer may end the call that holds the last reference.
  const std::shared_ptr<PartedPut> self = shared_from_this();
  std::vector<std::unique_ptr<ActiveStreams::Slot>> released;
  bool publish = false;
  absl::Status failed;
  {
    MutexLock lock(&mutex_);
    if (state_ != State::kReceiving) {
      // Failed meanwhile (a put that is publishing has every part already).
      failed = failure_.ok() ? absl::InternalError(absl::StrCat(
                                   "part at offset ", offset, " of the put of '", identity_.name,
                                   "' arrived after the put had ended"))
                             : failure_;
    } else {
      Part& part = parts_.at(offset);
      part.arrived = true;
      part.crc32c = crc32c;
      waiters_.push_back(Waiter{std::move(waiting_slot), std::move(answer)});
      publish = parts_.size() == identity_.part->parts;
      for (const auto& [unused, other] : parts_) publish = publish && other.arrived;
      if (publish) {
        state_ = State::kPublishing;
        released = TakeSlotsLocked();
      }
    }
  }
  released.clear();
  waiting_slot.reset();
  if (!failed.ok()) {
    answer(failed);
    return;
  }
  if (!publish) return;
  owner_.Forget(upload_id_, this, absl::OkStatus());
  Publish();
}

void PartedPut::Publish() {
  PendingVersion pending;
  uint32_t crc = 0;
  {
    MutexLock lock(&mutex_);
    for (const auto& [offset, part] : parts_) crc = Crc32cCombine(crc, part.crc32c, part.length);
    pending = std::move(pending_);
  }
  pending.crc32c = crc;
  PublishLatest(owner_.registry_, owner_.cluster_, std::move(pending), identity_.crc32c, replicas_,
                [self = shared_from_this()](absl::StatusOr<VersionInfo> info) {
                  if (info.ok()) {
                    Log(LogLevel::kInfo, "put",
                        {{"name", info->name},
                         {"version", info->version},
                         {"bytes", info->total_bytes},
                         {"parts", static_cast<uint64_t>(self->identity_.part->parts)}});
                  }
                  self->AnswerAll(info);
                });
}

void PartedPut::AnswerAll(const absl::StatusOr<VersionInfo>& outcome) {
  const std::shared_ptr<PartedPut> self = shared_from_this();
  std::vector<Waiter> waiters;
  {
    MutexLock lock(&mutex_);
    state_ = State::kEnded;
    waiters.swap(waiters_);
  }
  for (Waiter& waiter : waiters) waiter.slot.reset();
  for (Waiter& waiter : waiters) waiter.answer(outcome);
}

void PartedPut::Fail(const absl::Status& cause) {
  const std::shared_ptr<PartedPut> self = shared_from_this();
  std::vector<Waiter> waiters;
  absl::Status failure;
  {
    MutexLock lock(&mutex_);
    if (state_ != State::kReceiving) return;
    state_ = State::kEnded;
    failure_ =
        absl::AbortedError(absl::StrCat("put of '", identity_.name, "' in ", identity_.part->parts,
                                        " parts failed, nothing was published: ", cause.message()));
    failed_.store(true, std::memory_order_release);
    failure = failure_;
    waiters.swap(waiters_);
  }
  owner_.Forget(upload_id_, this, failure);
  for (Waiter& waiter : waiters) waiter.slot.reset();
  for (Waiter& waiter : waiters) waiter.answer(failure);
}

PartedPuts::PartedPuts(Registry& registry, ClusterAccess* cluster)
    : registry_(registry), cluster_(cluster) {}

absl::StatusOr<std::shared_ptr<PartedPut>> PartedPuts::Join(
    const ValidatedPut& put, uint32_t header_replicas, const TokenGrant* grant,
    const std::function<absl::StatusOr<Prepared>()>& prepare) {
  const std::string& upload_id = put.part->upload_id;
  std::shared_ptr<PartedPut> parted;
  absl::Status claimed;
  {
    MutexLock lock(&mutex_);
    auto found = puts_.find(upload_id);
    if (auto ended = ended_.find(upload_id); found == puts_.end() && ended != ended_.end()) {
      if (!ended->second.ok()) return ended->second;
      return absl::InvalidArgumentError(
          absl::StrCat("part [", put.part->offset, ", +", put.part->length, ") of the put of '",
                       put.name, "' came after its put (upload ", upload_id, ") was published"));
    }
    if (found != puts_.end()) {
      parted = found->second;
    } else {
      // Prepared under the table's lock, so two first parts arriving
      // together never reserve the tensor twice.
      TENSORD_ASSIGN_OR_RETURN(Prepared prepared, prepare());
      ValidatedPut identity = put;
      identity.part->offset = 0;
      identity.part->length = 0;
      parted = std::make_shared<PartedPut>(*this, upload_id, std::move(identity), header_replicas,
                                           grant, prepared.replicas, std::move(prepared.pending));
      puts_.emplace(upload_id, parted);
    }
    claimed = parted->Claim(put, header_replicas, grant);
  }
  if (claimed.ok()) return parted;
  // A part that cannot belong (another header, an overlap, a count or
  // coverage that cannot add up) means the put can never complete: it
  // fails now rather than at the idle timeout. Another token's part
  // leaves the put alone.
  if (claimed.code() == absl::StatusCode::kInvalidArgument) parted->Fail(claimed);
  return claimed;
}

size_t PartedPuts::receiving() const {
  MutexLock lock(&mutex_);
  return puts_.size();
}

void PartedPuts::Forget(const std::string& upload_id, const PartedPut* put,
                        const absl::Status& how) {
  MutexLock lock(&mutex_);
  auto found = puts_.find(upload_id);
  if (found == puts_.end() || found->second.get() != put) return;
  puts_.erase(found);
  if (ended_.insert_or_assign(upload_id, how).second) ended_order_.push_back(upload_id);
  while (ended_order_.size() > kRememberedEndings) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
}

}  // namespace tensord
