#include "service/cluster/cluster_writes.h"

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/cluster/group_index.h"
#include "service/cluster/name_record.h"
#include "service/cluster/peer_pull.h"
#include "service/cluster/rendezvous.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/wire/status_conversion.h"
#include "tensord/v1/tensor_service.grpc.pb.h"

namespace tensord {
namespace {

// A few more candidates than the copies wanted: room for nodes that are
// listed but dead or paused (until their TTL runs out).
constexpr size_t kSpareCandidates = 4;
// Compare-and-swap attempts to join a record's holders.
constexpr int kJoinAttempts = 8;

}  // namespace

ClusterWrites::ClusterWrites(ClusterWritesOptions options, Registry& registry,
                             std::shared_ptr<KvStore> store, RecordCommitter& committer,
                             MemberList& members, PeerChannels& peers, WorkPool& pool,
                             CacheCopies& cache_copies, LatestReads& latest)
    : options_(std::move(options)),
      registry_(registry),
      store_(std::move(store)),
      committer_(committer),
      members_(members),
      peers_(peers),
      pool_(pool),
      cache_copies_(cache_copies),
      latest_(latest),
      group_prefix_(absl::StrCat(options_.self, ".", absl::ToUnixMicros(absl::Now()))) {
  resolver_ = std::thread([this] { ResolveLoop(); });
}

ClusterWrites::~ClusterWrites() {
  {
    MutexLock lock(&unanswered_mu_);
    stopping_ = true;
    unanswered_cv_.SignalAll();
  }
  resolver_.join();
}

absl::StatusOr<uint32_t> ClusterWrites::ReplicasFor(absl::string_view name, uint32_t requested,
                                                    Retention retention) const {
  uint32_t replicas = ReplicasByRule(options_.replica_rules, name, requested);
  if (replicas > kMaxReplicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas=", replicas, " for '", name, "' is more than ", kMaxReplicas));
  }
  if (retention == Retention::kCache) {
    // A cache name has one copy by design (misses are allowed).
    if (requested > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("replicas=", requested, " for '", name,
                       "' asks copies of a cache tensor; cache tensors "
                       "keep one copy (use retention default or pinned for copies)"));
    }
    return 1u;
  }
  if (replicas <= 1) return replicas;
  const std::vector<ClusterMember> live = members_.members();
  if (live.size() < replicas) {
    std::vector<std::string> names;
    for (const ClusterMember& member : live) names.push_back(member.node_name);
    return absl::FailedPreconditionError(absl::StrCat(
        "replicas=", replicas, " for '", name, "' needs ", replicas,
        " live nodes; the cluster has ", live.size(), " (", absl::StrJoin(names, ", "), ")"));
  }
  return replicas;
}

void ClusterWrites::Commit(SealedVersion sealed, uint32_t replicas,
                           ClusterAccess::CommitDone done) {
  if (sealed.retention() == Retention::kCache) {
    absl::StatusOr<VersionInfo> installed = registry_.Install(std::move(sealed));
    if (installed.ok() && !installed->superseded) cache_copies_.Announce(*installed);
    std::move(done)(std::move(installed));
    return;
  }
  const std::string name = sealed.name();
  const std::string put_id = NextPutId();
  NameRecord record{.name = name,
                    .writer = options_.self,
                    .total_bytes = sealed.total_bytes(),
                    .crc32c = sealed.crc32c(),
                    .holders = {options_.self},
                    .put_id = put_id};
  std::vector<RecordChange> changes;
  changes.push_back(RecordChange{.name = name, .record = std::move(record)});
  auto sealed_holder = std::make_shared<std::vector<SealedVersion>>();
  sealed_holder->push_back(std::move(sealed));
  committer_.Commit(std::move(changes), [this, name, put_id, sealed_holder, replicas,
                                         done = std::move(done)](
                                            absl::StatusOr<RecordCommitted> committed) mutable {
    if (!committed.ok()) {
      if (committed.status().code() == absl::StatusCode::kUnavailable) {
        ResolveUnanswered({name}, put_id, sealed_holder);
      }
      std::move(done)(absl::Status(
          committed.status().code(),
          absl::StrCat("the put of '", name,
                       "' was not ordered by the cluster (etcd): ", committed.status().message())));
      return;
    }
    absl::StatusOr<VersionInfo> installed =
        registry_.Install(std::move(sealed_holder->front()), committed->revision);
    if (!installed.ok()) {
      Unrecord(name, committed->revision);
      std::move(done)(installed.status());
      return;
    }
    if (replicas <= 1 || installed->superseded) {
      std::move(done)(std::move(installed));
      return;
    }
    SendReplicas(*std::move(installed), replicas, std::move(done));
  });
}

void ClusterWrites::CommitGroup(std::vector<SealedVersion> group, uint32_t replicas,
                                ClusterAccess::GroupDone done) {
  const bool cache = std::all_of(group.begin(), group.end(), [](const SealedVersion& item) {
    return item.retention() == Retention::kCache;
  });
  if (cache) {
    absl::StatusOr<std::vector<VersionInfo>> installed = registry_.InstallGroup(std::move(group));
    if (installed.ok()) {
      for (const VersionInfo& info : *installed) {
        if (!info.superseded) cache_copies_.Announce(info);
      }
    }
    std::move(done)(std::move(installed));
    return;
  }
  // One record per item and the group's index key (group_index.h), in one
  // transaction: every node sees the whole group or none of it, and finds
  // it by that transaction's revision for as long as it stays whole.
  const std::string group_id = absl::StrCat(group_prefix_, ".g", ++next_group_);
  const std::string put_id = NextPutId();
  std::vector<RecordChange> changes;
  std::vector<std::string> names;
  for (const SealedVersion& item : group) {
    names.push_back(item.name());
    changes.push_back(RecordChange{.name = item.name(),
                                   .record = NameRecord{.name = item.name(),
                                                        .writer = options_.self,
                                                        .total_bytes = item.total_bytes(),
                                                        .crc32c = item.crc32c(),
                                                        .holders = {options_.self},
                                                        .group = group_id,
                                                        .put_id = put_id}});
  }
  changes.front().also.push_back(
      KvOp::Put(GroupIndexKey(options_.prefix, group_id), EncodeGroupIndex(names)));
  auto held = std::make_shared<std::vector<SealedVersion>>(std::move(group));
  committer_.Commit(std::move(changes), [this, held, replicas, put_id, names = std::move(names),
                                         done = std::move(done)](
                                            absl::StatusOr<RecordCommitted> committed) mutable {
    if (!committed.ok()) {
      if (committed.status().code() == absl::StatusCode::kUnavailable) {
        ResolveUnanswered(names, put_id, held);
      }
      std::move(done)(absl::Status(committed.status().code(),
                                   absl::StrCat("the atomic group was not ordered by the cluster "
                                                "(etcd): ",
                                                committed.status().message())));
      return;
    }
    absl::StatusOr<std::vector<VersionInfo>> installed =
        registry_.InstallGroup(std::move(*held), committed->revision);
    if (!installed.ok()) {
      for (const std::string& name : names) Unrecord(name, committed->revision);
    }
    if (!installed.ok() || replicas <= 1 || installed->front().superseded) {
      std::move(done)(std::move(installed));
      return;
    }
    SendGroupReplicas(*std::move(installed), replicas, std::move(done));
  });
}

std::string ClusterWrites::NextPutId() { return absl::StrCat(group_prefix_, ".", ++next_put_); }

void ClusterWrites::ResolveUnanswered(std::vector<std::string> names, std::string put_id,
                                      std::shared_ptr<std::vector<SealedVersion>> sealed) {
  MutexLock lock(&unanswered_mu_);
  unanswered_.push_back(Unanswered{
      .names = std::move(names), .put_id = std::move(put_id), .sealed = std::move(sealed)});
  unanswered_cv_.Signal();
}

absl::StatusOr<bool> ClusterWrites::Resolve(Unanswered& unanswered) {
  TENSORD_ASSIGN_OR_RETURN(
      std::optional<EtcdKeyValue> kv,
      KvGet(*store_, NameRecordKey(options_.prefix, unanswered.names.front())));
  int64_t origin = 0;
  if (kv.has_value()) {
    absl::StatusOr<NameRecord> record = DecodeNameRecord(options_.prefix, *kv);
    if (record.ok() && record->put_id == unanswered.put_id) origin = record->origin;
  }
  // Not made, or overwritten since: nobody needs these bytes.
  if (origin == 0) return true;
  std::vector<SealedVersion>& sealed = *unanswered.sealed;
  absl::Status installed = sealed.size() == 1
                               ? registry_.Install(std::move(sealed.front()), origin).status()
                               : registry_.InstallGroup(std::move(sealed), origin).status();
  Log(LogLevel::kInfo, "cluster_unanswered_put_resolved",
      {{"name", unanswered.names.front()},
       {"items", unanswered.names.size()},
       {"origin", origin},
       {"installed", installed.ToString()}});
  if (!installed.ok()) {
    for (const std::string& name : unanswered.names) Unrecord(name, origin);
  }
  return true;
}

void ClusterWrites::ResolveLoop() {
  // Between passes while etcd does not answer: from 250 ms up to 5 s.
  absl::Duration pause = absl::Milliseconds(250);
  bool waiting_logged = false;  // one line per stretch without etcd
  while (true) {
    std::vector<Unanswered> pending;
    {
      MutexLock lock(&unanswered_mu_);
      while (!stopping_ && unanswered_.empty()) unanswered_cv_.Wait(&unanswered_mu_);
      if (stopping_) return;
      pending.swap(unanswered_);
    }
    std::vector<Unanswered> again;
    for (size_t i = 0; i < pending.size(); ++i) {
      absl::StatusOr<bool> settled = Resolve(pending[i]);
      if (settled.ok()) continue;
      // etcd cannot be asked: the rest wait for the next pass, bytes kept
      // (however long it takes: dropping them could lose the name's latest).
      if (!waiting_logged) {
        Log(LogLevel::kWarning, "cluster_unanswered_puts_waiting",
            {{"puts", pending.size() - i}, {"error", settled.status().ToString()}});
        waiting_logged = true;
      }
      for (size_t j = i; j < pending.size(); ++j) again.push_back(std::move(pending[j]));
      break;
    }
    if (again.empty()) {
      waiting_logged = false;
      pause = absl::Milliseconds(250);
    } else {
      pause = std::min(pause * 2, absl::Seconds(5));
    }
    MutexLock lock(&unanswered_mu_);
    for (Unanswered& item : again) unanswered_.push_back(std::move(item));
    if (!again.empty() && !stopping_) unanswered_cv_.WaitWithTimeout(&unanswered_mu_, pause);
  }
}

void ClusterWrites::Unrecord(const std::string& name, int64_t origin) {
  const std::string key = NameRecordKey(options_.prefix, name);
  const KvCompare still = KvCompare::ModRevisionIs(key, origin);
  const KvOp remove = KvOp::Delete(key).ReturningPrevious();
  absl::StatusOr<KvTxnResult> removed = store_->Txn({&still, 1}, {&remove, 1}, {});
  if (removed.ok() && removed->succeeded) {
    // A group's member gone: so is its index key.
    RemoveGroupsBrokenBy(*store_, options_.prefix, removed->results.front().previous, {},
                         committer_.max_ops_per_txn());
  }
  Log(LogLevel::kWarning, "cluster_put_unrecorded",
      {{"name", name},
       {"origin", origin},
       {"removed", removed.ok() && removed->succeeded},
       {"error", removed.ok() ? std::string() : removed.status().ToString()}});
}

void ClusterWrites::Delete(std::string name, ClusterAccess::Done done) {
  std::vector<RecordChange> changes;
  changes.push_back(RecordChange{.name = name, .record = std::nullopt});
  committer_.Commit(std::move(changes), [this, name, done = std::move(done)](
                                            absl::StatusOr<RecordCommitted> committed) mutable {
    if (!committed.ok()) {
      std::move(done)(absl::Status(committed.status().code(),
                                   absl::StrCat("the delete of '", name,
                                                "' was not ordered by the cluster (etcd), so it "
                                                "was not applied: ",
                                                committed.status().message())));
      return;
    }
    // A cache copy here is the name's only trace: it goes with the delete
    // (and counts as found: asked before the stale copies go, which would
    // take it too).
    bool cache_here = false;
    if (absl::StatusOr<VersionInfo> local = registry_.Stat(name, 0);
        local.ok() && local->origin == 0) {
      cache_here = registry_.Delete(name, local->version).ok();
    }
    // Every copy ordered before the delete goes; a newer put here stays.
    latest_.DropStaleCopy(name, committed->revision);
    // Whether a durable name was there is the record's to say: a copy here
    // may be one another delete already removed from the cluster.
    if (!committed->removed && !cache_here) {
      std::move(done)(absl::NotFoundError(
          absl::StrCat("tensor '", name, "' not found on this node nor in the cluster")));
      return;
    }
    std::move(done)(absl::OkStatus());
  });
}

namespace {

// One put's copies in flight: the ranked candidates, the calls running,
// and what came back. A target that fails (a node killed but still listed
// within its TTL) or is slow (paused) hands its copy to the next.
struct ReplicaRound : std::enable_shared_from_this<ReplicaRound> {
  struct Call {
    grpc::ClientContext context;
    v1::ReplicateResponse response;
    std::unique_ptr<v1::TensorService::Stub> stub;
    std::string node;
    grpc::Alarm hedge;
  };

  PeerChannels* peers = nullptr;
  std::vector<ClusterMember> candidates;  // best first
  v1::ReplicateRequest request;
  absl::Duration timeout;
  absl::Duration hedge_after;
  size_t wanted = 0;
  VersionInfo info;
  ClusterAccess::CommitDone done;

  Mutex mu;
  size_t next_candidate ABSL_GUARDED_BY(mu) = 0;
  size_t succeeded ABSL_GUARDED_BY(mu) = 0;
  size_t running ABSL_GUARDED_BY(mu) = 0;
  bool answered ABSL_GUARDED_BY(mu) = false;
  std::vector<std::string> failures ABSL_GUARDED_BY(mu);
  std::vector<std::shared_ptr<Call>> calls ABSL_GUARDED_BY(mu);

  // Starts calls until `wanted` succeeded or are running, while candidates last.
  void Launch(bool hedge) {
    std::vector<size_t> starting;
    {
      MutexLock lock(&mu);
      if (answered) return;
      const size_t extra = hedge ? 1 : 0;
      while (succeeded + running < wanted + extra && next_candidate < candidates.size()) {
        starting.push_back(next_candidate++);
        ++running;
      }
    }
    for (size_t candidate : starting) Send(candidate);
  }

  void Send(size_t candidate) {
    auto call = std::make_shared<Call>();
    call->node = candidates[candidate].node_name;
    peers->Prepare(call->context, timeout);
    call->stub =
        v1::TensorService::NewStub(peers->ChannelTo(candidates[candidate].advertise_address));
    {
      MutexLock lock(&mu);
      calls.push_back(call);
    }
    Call* raw = call.get();
    raw->stub->async()->Replicate(
        &raw->context, &request, &raw->response,
        [self = shared_from_this(), call](grpc::Status status) { self->Answered(*call, status); });
    // A target that is slow to answer gets company (not a replacement:
    // whichever answers first counts).
    raw->hedge.Set(absl::ToChronoTime(absl::Now() + hedge_after),
                   [self = shared_from_this()](bool fired) {
                     if (fired) self->Launch(/*hedge=*/true);
                   });
  }

  void Answered(const Call& call, const grpc::Status& status) {
    ClusterAccess::CommitDone finishing;
    absl::Status outcome;
    {
      MutexLock lock(&mu);
      --running;
      if (status.ok()) {
        ++succeeded;
      } else {
        failures.push_back(absl::StrCat(call.node, ": ", FromGrpcStatus(status).ToString()));
      }
      if (answered) return;
      const bool enough = succeeded >= wanted;
      const bool hopeless = running == 0 && next_candidate >= candidates.size();
      if (!enough && !hopeless) {
        // Not done: a failed target hands its copy to the next candidate.
      } else {
        answered = true;
        finishing = std::move(done);
        if (!enough) {
          outcome = absl::UnavailableError(absl::StrCat(
              "'", request.name(), "' is published and ordered, but only ", succeeded, " of its ",
              wanted, " copies on other nodes could be made: ", absl::StrJoin(failures, "; ")));
        }
        // Copies still running are not waited for; they are not needed.
        for (const std::shared_ptr<Call>& running_call : calls) {
          running_call->hedge.Cancel();
          if (running_call.get() != &call) running_call->context.TryCancel();
        }
      }
    }
    if (!finishing) {
      if (!status.ok()) Launch(/*hedge=*/false);
      return;
    }
    if (outcome.ok()) {
      std::move(finishing)(info);
    } else {
      std::move(finishing)(outcome);
    }
  }
};

}  // namespace

void ClusterWrites::SendReplicas(VersionInfo info, uint32_t replicas,
                                 ClusterAccess::CommitDone done) {
  std::vector<ClusterMember> ranked =
      RankMembers(info.name, members_.members(), options_.self, replicas - 1 + kSpareCandidates);
  if (ranked.size() + 1 < replicas) {
    std::move(done)(absl::UnavailableError(
        absl::StrCat("'", info.name, "' is published and ordered, but only ", ranked.size(),
                     " other live nodes can take its ", replicas - 1, " copies")));
    return;
  }
  auto round = std::make_shared<ReplicaRound>();
  round->peers = &peers_;
  round->candidates = std::move(ranked);
  round->request.set_name(info.name);
  round->request.set_source_node(options_.self);
  round->request.set_origin(info.origin);
  round->request.set_total_bytes(info.total_bytes);
  round->request.set_crc32c(info.crc32c);
  round->timeout = PullTimeout(info.total_bytes) + absl::Seconds(5);
  round->hedge_after =
      options_.hedge_after + absl::Seconds(static_cast<double>(info.total_bytes) / 1e9);
  round->wanted = replicas - 1;
  round->info = std::move(info);
  round->done = std::move(done);
  round->Launch(/*hedge=*/false);
}

void ClusterWrites::SendGroupReplicas(std::vector<VersionInfo> infos, uint32_t replicas,
                                      ClusterAccess::GroupDone done) {
  // Every item's copies in parallel; the group answers once all did.
  struct Gathered {
    Mutex mu;
    size_t left ABSL_GUARDED_BY(mu) = 0;
    absl::Status failure ABSL_GUARDED_BY(mu);
    std::vector<VersionInfo> infos;
    ClusterAccess::GroupDone done;
  };
  auto gathered = std::make_shared<Gathered>();
  {
    MutexLock lock(&gathered->mu);
    gathered->left = infos.size();
  }
  gathered->infos = infos;
  gathered->done = std::move(done);
  for (VersionInfo& info : infos) {
    SendReplicas(std::move(info), replicas, [gathered](absl::StatusOr<VersionInfo> copied) {
      absl::Status failure;
      {
        MutexLock lock(&gathered->mu);
        if (!copied.ok() && gathered->failure.ok()) gathered->failure = copied.status();
        if (--gathered->left != 0) return;
        failure = gathered->failure;
      }
      if (!failure.ok()) {
        std::move(gathered->done)(failure);
      } else {
        std::move(gathered->done)(std::move(gathered->infos));
      }
    });
  }
}

void ClusterWrites::Replicate(ReplicaSource source, ClusterAccess::Done done) {
  auto shared = std::make_shared<ClusterAccess::Done>(std::move(done));
  pool_.Run(
      [this, source = std::move(source), shared]() mutable {
        absl::StatusOr<std::shared_ptr<const TensorVersion>> local = registry_.Find(source.name, 0);
        const int64_t held = local.ok() ? (*local)->origin.load(std::memory_order_relaxed) : 0;
        if (held < source.origin) {
          // The caller names the version and the node; the member list says
          // where that node is, so a caller cannot point this node (and its
          // token) at another host.
          std::optional<ClusterMember> member = members_.Find(source.node);
          if (!member.has_value()) {
            std::move (*shared)(absl::FailedPreconditionError(
                absl::StrCat("node ", source.node, " is not a live member; '", source.name,
                             "' is not copied from it")));
            return;
          }
          PullSource pull{.name = source.name,
                          .node = source.node,
                          .address = member->advertise_address,
                          .origin = source.origin,
                          .total_bytes = source.total_bytes,
                          .crc32c = source.crc32c};
          absl::StatusOr<PendingVersion> pulled =
              PullVersion(peers_, registry_, pull, Retention::kDefault);
          if (!pulled.ok()) {
            std::move (*shared)(pulled.status());
            return;
          }
          pulled->origin = source.origin;
          absl::Status published = registry_.Publish(*std::move(pulled)).status();
          if (!published.ok()) {
            std::move (*shared)(published);
            return;
          }
        } else if (held > source.origin) {
          std::move (*shared)(absl::OkStatus());  // overwritten meanwhile: the copy is moot
          return;
        } else if ((*local)->retention == Retention::kCache) {
          // A reader's copy of this very version, which eviction may drop:
          // a replica must stay, so it becomes a durable copy first.
          if (absl::Status kept = KeepDurably(**local); !kept.ok()) {
            std::move (*shared)(kept);
            return;
          }
        }
        std::move (*shared)(JoinHolders(source.name, source.origin));
      },
      [shared]() mutable {
        std::move (*shared)(absl::UnavailableError("the node is shutting down"));
      });
}

absl::Status ClusterWrites::KeepDurably(const TensorVersion& copy) {
  const int64_t origin = copy.origin.load(std::memory_order_relaxed);
  TENSORD_ASSIGN_OR_RETURN(PendingVersion durable,
                           registry_.Prepare(copy.name, copy.layout, copy.total_bytes));
  TENSORD_RETURN_IF_ERROR(durable.buffer->Write(0, copy.buffer->data(), copy.total_bytes));
  durable.origin = origin;
  // Superseded when a newer version came meanwhile: JoinHolders then finds
  // the record moved on and leaves it alone.
  return registry_.Publish(std::move(durable), copy.crc32c).status();
}

absl::Status ClusterWrites::JoinHolders(const std::string& name, int64_t origin) {
  const std::string key = NameRecordKey(options_.prefix, name);
  for (int attempt = 0; attempt < kJoinAttempts; ++attempt) {
    TENSORD_ASSIGN_OR_RETURN(std::optional<EtcdKeyValue> kv, KvGet(*store_, key));
    if (!kv.has_value()) return absl::OkStatus();  // deleted meanwhile
    TENSORD_ASSIGN_OR_RETURN(NameRecord record, DecodeNameRecord(options_.prefix, *kv));
    if (record.origin != origin) return absl::OkStatus();  // overwritten meanwhile
    if (std::find(record.holders.begin(), record.holders.end(), options_.self) !=
        record.holders.end()) {
      return absl::OkStatus();
    }
    if (record.holders.size() >= kMaxRecordHolders) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "'", name, "' already lists ", record.holders.size(), " holders, the most a record has"));
    }
    record.holders.push_back(options_.self);
    const KvCompare unchanged = KvCompare::ModRevisionIs(key, kv->mod_revision);
    const KvOp write = KvOp::Put(key, EncodeNameRecord(record, /*with_origin=*/true));
    TENSORD_ASSIGN_OR_RETURN(KvTxnResult written, store_->Txn({&unchanged, 1}, {&write, 1}, {}));
    if (written.succeeded) return absl::OkStatus();
  }
  return absl::AbortedError(absl::StrCat("the record of '", name, "' kept changing while node ",
                                         options_.self, " joined its holders; retry"));
}

}  // namespace tensord
