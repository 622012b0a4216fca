#include "service/cluster/latest_reads.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/cluster/peer_pull.h"
#include "service/common/log.h"

namespace tensord {
namespace {

// The answers of one EnsureLatest, gathered from several threads.
class Gather {
 public:
  Gather(size_t count, ClusterAccess::ReadDone done) : left_(count), done_(std::move(done)) {
    for (size_t i = 0; i < count; ++i) answers_.emplace_back(absl::UnknownError("unanswered"));
  }

  void Set(size_t index, absl::StatusOr<Lease> answer) {
    ClusterAccess::ReadDone done;
    std::vector<absl::StatusOr<Lease>> answers;
    {
      MutexLock lock(&mu_);
      answers_[index] = std::move(answer);
      if (--left_ != 0) return;
      done = std::move(done_);
      answers = std::move(answers_);
    }
    std::move(done)(std::move(answers));
  }

 private:
  Mutex mu_;
  std::vector<absl::StatusOr<Lease>> answers_ ABSL_GUARDED_BY(mu_);
  size_t left_ ABSL_GUARDED_BY(mu_);
  ClusterAccess::ReadDone done_ ABSL_GUARDED_BY(mu_);
};

int64_t OriginOf(const TensorVersion& version) {
  return version.origin.load(std::memory_order_relaxed);
}

}  // namespace

LatestReads::LatestReads(std::string self, Registry& registry, RecordReader& records,
                         MemberList& members, PeerChannels& peers, WorkPool& pool,
                         LocateCacheCopy locate_cache_copy, JoinHolders join_holders)
    : self_(std::move(self)),
      registry_(registry),
      records_(records),
      members_(members),
      peers_(peers),
      pool_(pool),
      locate_cache_copy_(std::move(locate_cache_copy)),
      join_holders_(std::move(join_holders)) {}

LatestReads::~LatestReads() {
  std::vector<PullDone> waiting;
  {
    MutexLock lock(&mu_);
    for (auto& [key, pull] : pulling_) {
      for (PullDone& done : pull.waiting) waiting.push_back(std::move(done));
    }
    pulling_.clear();
  }
  for (PullDone& done : waiting)
    std::move(done)(absl::UnavailableError("the node is shutting down"));
}

void LatestReads::EnsureLatest(std::vector<std::string> names, ClusterAccess::ReadDone done) {
  if (names.empty()) {
    std::move(done)({});
    return;
  }
  auto gather = std::make_shared<Gather>(names.size(), std::move(done));
  std::vector<std::string> asked;
  std::vector<size_t> asked_index;
  for (size_t i = 0; i < names.size(); ++i) {
    if (std::optional<Lease> cached = UnorderedCacheCopy(names[i])) {
      gather->Set(i, *std::move(cached));
      continue;
    }
    asked.push_back(std::move(names[i]));
    asked_index.push_back(i);
  }
  if (asked.empty()) return;
  std::vector<std::string> asked_names = asked;
  records_.Read(std::move(asked_names),
                [this, gather, asked = std::move(asked), asked_index = std::move(asked_index)](
                    std::vector<RecordReader::Answer> answers) mutable {
                  for (size_t k = 0; k < answers.size(); ++k) {
                    Decide(asked[k], std::move(answers[k]), /*attempt=*/1,
                           [gather, index = asked_index[k]](absl::StatusOr<Lease> answer) {
                             gather->Set(index, std::move(answer));
                           });
                  }
                });
}

std::optional<Lease> LatestReads::UnorderedCacheCopy(const std::string& name) {
  absl::StatusOr<std::shared_ptr<const TensorVersion>> local = registry_.Find(name, 0);
  if (local.ok() && (*local)->retention == Retention::kCache && OriginOf(**local) == 0) {
    return Lease(*std::move(local));
  }
  return std::nullopt;
}

void LatestReads::EnsureLatestSource(std::string name, ClusterAccess::SourceDone done) {
  if (std::optional<Lease> cached = UnorderedCacheCopy(name)) {
    std::move(done)(LatestSource{.lease = *std::move(cached), .filling = nullptr});
    return;
  }
  // Decide answers through exactly one of the two callbacks.
  auto shared = std::make_shared<ClusterAccess::SourceDone>(std::move(done));
  records_.Read({name}, [this, name, shared](std::vector<RecordReader::Answer> answers) {
    Decide(
        name, std::move(answers.front()), /*attempt=*/1,
        [shared](absl::StatusOr<Lease> lease) {
          if (!lease.ok()) {
            std::move (*shared)(lease.status());
            return;
          }
          std::move (*shared)(LatestSource{.lease = *std::move(lease), .filling = nullptr});
        },
        [shared](std::shared_ptr<FillingVersion> filling) {
          std::move (*shared)(LatestSource{.lease = Lease(), .filling = std::move(filling)});
        });
  });
}

void LatestReads::Decide(const std::string& name, RecordReader::Answer answer, int attempt,
                         NameDone done, FillingDone filling) {
  if (!answer.ok()) {
    // Without the record no copy can be known to be the latest.
    std::move(done)(absl::UnavailableError(answer.status().message()));
    return;
  }
  absl::StatusOr<std::shared_ptr<const TensorVersion>> local = registry_.Find(name, 0);
  const int64_t local_origin = local.ok() ? OriginOf(**local) : 0;
  if (!answer->has_value()) {
    // No durable version: an ordered copy here was overwritten by a delete.
    if (local.ok() && local_origin != 0) DropStaleCopy(name, INT64_MAX);
    PullCacheCopy(name, std::move(done));
    return;
  }
  NameRecord& record = **answer;
  // A newer copy here is a put that etcd ordered after this read began:
  // serving it is as right as serving the record's. The lease keeps the
  // version even if a newer one replaces it before the read is served.
  if (local.ok() && local_origin != 0 && local_origin >= record.origin) {
    std::move(done)(Lease(*std::move(local)));
    return;
  }
  // A streaming reader is passed the version as it arrives: it was the
  // latest when the record was read, and stays its answer even if a newer
  // one replaces it before the copy ends.
  if (filling && record.total_bytes > ClusterAccess::kStreamedCopyBytes) {
    std::move(filling)(PullOrdered(std::move(record), [](absl::Status) {}));
    return;
  }
  const std::string pulled_name = record.name;
  const int64_t origin = record.origin;
  PullOrdered(std::move(record), [this, pulled_name, origin, attempt,
                                  done = std::move(done)](absl::Status pulled) mutable {
    if (!pulled.ok()) {
      std::move(done)(pulled);
      return;
    }
    LeasePulled(pulled_name, origin, attempt, std::move(done));
  });
}

void LatestReads::LeasePulled(const std::string& name, int64_t origin, int attempt, NameDone done) {
  absl::StatusOr<std::shared_ptr<const TensorVersion>> local = registry_.Find(name, 0);
  if (local.ok() && OriginOf(**local) >= origin) {
    std::move(done)(Lease(*std::move(local)));
    return;
  }
  // Replaced (or dropped for a newer record) between the pull and now: the
  // record is read again, a few times at most.
  if (attempt >= kAttempts) {
    std::move(done)(
        absl::UnavailableError(absl::StrCat("tensor '", name, "' was replaced ", kAttempts,
                                            " times while this node copied it; retry")));
    return;
  }
  records_.Read({name}, [this, name, attempt, done = std::move(done)](
                            std::vector<RecordReader::Answer> answers) mutable {
    Decide(name, std::move(answers.front()), attempt + 1, std::move(done));
  });
}

bool LatestReads::DropStaleCopy(const std::string& name, int64_t newer_origin) {
  absl::StatusOr<std::shared_ptr<const TensorVersion>> local = registry_.Find(name, 0);
  if (!local.ok()) return false;
  const int64_t origin = OriginOf(**local);
  // Only a copy the cluster ordered before `newer_origin`; a cache copy
  // nobody ordered gives way to any durable version of its name.
  const bool ordered_older = origin != 0 && origin < newer_origin;
  const bool unordered_cache =
      origin == 0 && (*local)->retention == Retention::kCache && newer_origin != INT64_MAX;
  if (!ordered_older && !unordered_cache) return false;
  if (!registry_.Delete(name, (*local)->version).ok()) return false;
  stale_dropped_.fetch_add(1, std::memory_order_relaxed);
  Log(LogLevel::kDebug, "cluster_stale_copy_dropped",
      {{"name", name},
       {"version", (*local)->version},
       {"origin", origin},
       {"newer_origin", newer_origin}});
  return true;
}

std::shared_ptr<FillingVersion> LatestReads::PullOrdered(NameRecord record, PullDone done) {
  const std::pair<std::string, int64_t> key(record.name, record.origin);
  std::shared_ptr<FillingVersion> filling;
  {
    MutexLock lock(&mu_);
    auto [it, first] = pulling_.try_emplace(key);
    it->second.waiting.push_back(std::move(done));
    if (!first) {
      pulls_joined_.fetch_add(1, std::memory_order_relaxed);
      return it->second.filling;
    }
    filling = it->second.filling = std::make_shared<FillingVersion>();
  }
  auto finish = [this, key](absl::Status status) {
    std::vector<PullDone> waiting;
    {
      MutexLock lock(&mu_);
      auto it = pulling_.find(key);
      if (it == pulling_.end()) return;  // answered at shutdown
      waiting = std::move(it->second.waiting);
      pulling_.erase(it);
    }
    for (PullDone& waiter : waiting) std::move(waiter)(status);
  };
  pool_.Run(
      [this, record = std::move(record), finish, filling]() mutable {
        const absl::Status pulled = PullFromHolders(record, *filling);
        finish(pulled);
        if (!pulled.ok() || !join_holders_) return;
        // Only while this node still holds that version (not overtaken).
        absl::StatusOr<std::shared_ptr<const TensorVersion>> held = registry_.Find(record.name, 0);
        if (!held.ok() || OriginOf(**held) != record.origin) return;
        if (absl::Status joined = join_holders_(record.name, record.origin); !joined.ok()) {
          Log(LogLevel::kDebug, "cluster_holder_join_failed",
              {{"name", record.name}, {"origin", record.origin}, {"error", joined.ToString()}});
        }
      },
      [finish, filling]() mutable {
        const absl::Status stopped = absl::UnavailableError("the node is shutting down");
        filling->Fail(stopped);
        finish(stopped);
      });
  return filling;
}

absl::Status LatestReads::PullFromHolders(const NameRecord& record, FillingVersion& filling) {
  absl::Status status = PullFromSomeHolder(record, filling);
  // A copy that was pulled ended in Complete; every other end fails it.
  if (!status.ok()) filling.Fail(status);
  return status;
}

absl::Status LatestReads::PullFromSomeHolder(const NameRecord& record, FillingVersion& filling) {
  std::vector<std::string> failures;
  for (const std::string& holder : record.holders) {
    if (holder == self_) {
      // Listed, but the copy is not here (lost with a restart without a
      // snapshot, or dropped): another holder must serve it.
      failures.push_back(absl::StrCat(holder, ": this node, which does not have it"));
      continue;
    }
    // Only a live member is trusted, and only at the address it registered.
    std::optional<ClusterMember> member = members_.Find(holder);
    if (!member.has_value()) {
      failures.push_back(absl::StrCat(holder, ": not a live member"));
      continue;
    }
    PullSource source{.name = record.name,
                      .node = holder,
                      .address = member->advertise_address,
                      .origin = record.origin,
                      .total_bytes = record.total_bytes,
                      .crc32c = record.crc32c};
    absl::StatusOr<PendingVersion> pulled =
        PullVersion(peers_, registry_, source, Retention::kCache, &filling);
    if (pulled.ok()) {
      pulled->origin = record.origin;
      absl::StatusOr<SealedVersion> sealed = registry_.Seal(*std::move(pulled));
      if (!sealed.ok()) return sealed.status();
      std::shared_ptr<const TensorVersion> version = sealed->Share();
      absl::StatusOr<VersionInfo> published = registry_.Install(*std::move(sealed));
      if (!published.ok()) return published.status();
      filling.Complete(std::move(version));
      pulls_.fetch_add(1, std::memory_order_relaxed);
      pulled_bytes_.fetch_add(record.total_bytes, std::memory_order_relaxed);
      Log(LogLevel::kInfo, "cluster_pulled",
          {{"name", record.name},
           {"from", holder},
           {"bytes", record.total_bytes},
           {"origin", record.origin},
           {"superseded", published->superseded}});
      return absl::OkStatus();
    }
    filling.Abandon();
    if (pulled.status().code() == absl::StatusCode::kResourceExhausted) return pulled.status();
    pull_failures_.fetch_add(1, std::memory_order_relaxed);
    failures.push_back(absl::StrCat(holder, ": ", pulled.status().message()));
  }
  return absl::UnavailableError(absl::StrCat(
      "tensor '", record.name, "' (cluster version ", record.origin,
      ") is held by no live node that could serve it, and an older version is never served "
      "instead: ",
      absl::StrJoin(failures, "; ")));
}

void LatestReads::PullCacheCopy(const std::string& name, NameDone done_once) {
  // Either the work or its abandonment answers.
  auto shared = std::make_shared<NameDone>(std::move(done_once));
  pool_.Run(
      [this, name, shared]() mutable {
        NameDone done = std::move(*shared);
        absl::StatusOr<CopyLocation> location = locate_cache_copy_(name);
        if (!location.ok()) {
          std::move(done)(
              location.status().code() == absl::StatusCode::kNotFound
                  ? absl::NotFoundError(absl::StrCat("tensor '", name,
                                                     "' is not held by this node nor any node of "
                                                     "the cluster"))
                  : location.status());
          return;
        }
        std::optional<ClusterMember> member = members_.Find(location->node);
        if (!member.has_value()) {
          std::move(done)(
              absl::NotFoundError(absl::StrCat("tensor '", name, "' is a cache copy of node ",
                                               location->node, ", which is not a live member")));
          return;
        }
        PullSource source{.name = name,
                          .node = location->node,
                          .address = member->advertise_address,
                          .version = location->version,
                          .total_bytes = location->total_bytes,
                          .crc32c = location->crc32c};
        absl::StatusOr<PendingVersion> pulled =
            PullVersion(peers_, registry_, source, Retention::kCache);
        if (!pulled.ok()) {
          pull_failures_.fetch_add(1, std::memory_order_relaxed);
          // A cache copy may go at any time: a miss, not an outage.
          std::move(done)(absl::NotFoundError(
              absl::StrCat("tensor '", name, "' is a cache copy of node ", location->node,
                           " that could not be copied: ", pulled.status().message())));
          return;
        }
        absl::StatusOr<VersionInfo> published = registry_.Publish(*std::move(pulled));
        if (!published.ok()) {
          std::move(done)(published.status());
          return;
        }
        pulls_.fetch_add(1, std::memory_order_relaxed);
        pulled_bytes_.fetch_add(location->total_bytes, std::memory_order_relaxed);
        Log(LogLevel::kInfo, "cluster_pulled",
            {{"name", name},
             {"from", location->node},
             {"bytes", location->total_bytes},
             {"origin", 0},
             {"cache_copy", true}});
        absl::StatusOr<std::shared_ptr<const TensorVersion>> local =
            registry_.Find(name, published->version);
        if (!local.ok()) {
          std::move(done)(absl::NotFoundError(absl::StrCat(
              "tensor '", name, "' (a cache copy) was replaced as it was copied here")));
          return;
        }
        std::move(done)(Lease(*std::move(local)));
      },
      [shared]() mutable {
        std::move (*shared)(absl::UnavailableError("the node is shutting down"));
      });
}

LatestReadsStats LatestReads::stats() const {
  return LatestReadsStats{.pulls = pulls_.load(std::memory_order_relaxed),
                          .pulled_bytes = pulled_bytes_.load(std::memory_order_relaxed),
                          .pull_failures = pull_failures_.load(std::memory_order_relaxed),
                          .pulls_joined = pulls_joined_.load(std::memory_order_relaxed),
                          .stale_copies_dropped = stale_dropped_.load(std::memory_order_relaxed)};
}

}  // namespace tensord
