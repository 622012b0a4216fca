#include "service/cluster/cluster_membership.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "service/cluster/node_record.h"
#include "service/common/host_identity.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"

namespace tensord {
namespace {

constexpr absl::Duration kFirstRetry = absl::Milliseconds(250);

std::string Describe(const ClusterMember& member) {
  return absl::StrCat(
      "advertise address ", member.advertise_address, ", started ",
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(member.start_time_unix_ms),
                       absl::UTCTimeZone()),
      ", instance ", member.instance_id);
}

}  // namespace

absl::Status ValidateMembershipOptions(const MembershipOptions& options) {
  if (!absl::StartsWith(options.prefix, "/") || absl::EndsWith(options.prefix, "/") ||
      options.prefix.size() > 512) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd prefix '", options.prefix,
                     "' must start with '/', not end with one, and be at most 512 characters"));
  }
  TENSORD_RETURN_IF_ERROR(ValidateNodeName(options.node_name));
  if (options.lease_ttl < absl::Seconds(1) || options.lease_ttl > absl::Hours(1) ||
      options.lease_ttl != absl::Trunc(options.lease_ttl, absl::Seconds(1))) {
    return absl::InvalidArgumentError(absl::StrCat("etcd lease TTL ",
                                                   absl::FormatDuration(options.lease_ttl),
                                                   " must be whole seconds in 1s..1h"));
  }
  return absl::OkStatus();
}

std::string ClusterMembership::NodeKey(absl::string_view prefix, absl::string_view node_name) {
  return absl::StrCat(prefix, "/nodes/", node_name);
}

ClusterMembership::ClusterMembership(std::shared_ptr<KvStore> etcd, MembershipOptions options)
    : etcd_(std::move(etcd)),
      options_(std::move(options)),
      key_(NodeKey(options_.prefix, options_.node_name)),
      // An episode ends only after a quiet period longer than any gap
      // between retries, so one outage logs one warning.
      unreachable_log_("etcd_unreachable", 2 * options_.lease_ttl + absl::Seconds(10)),
      name_conflict_log_("cluster_name_conflict", 2 * options_.lease_ttl + absl::Seconds(10)),
      granted_ttl_(options_.lease_ttl) {}

// How long a start waits for an etcd that answers too slowly to join.
constexpr absl::Duration kJoinPatience = absl::Seconds(20);

ClusterMembership::~ClusterMembership() { Leave(); }

absl::Status ClusterMembership::Join(ClusterMember self, CapacitySource capacity) {
  TENSORD_RETURN_IF_ERROR(ValidateMembershipOptions(options_));
  {
    MutexLock lock(&mu_);
    if (joined_) return absl::FailedPreconditionError("this node has already joined");
  }
  self.node_name = options_.node_name;
  self.instance_id = absl::StrCat(BootId(), "/", getpid(), "/", self.start_time_unix_ms);
  self_ = std::move(self);
  capacity_ = std::move(capacity);
  // etcd that answers but slowly (a busy disk under its fsyncs) is given
  // time; etcd that cannot be reached fails the start at once.
  const absl::Time give_up = absl::Now() + kJoinPatience;
  for (absl::Status registered = RegisterWithNewLease(); !registered.ok();
       registered = RegisterWithNewLease()) {
    if (!IsKvTimedOut(registered) || absl::Now() >= give_up) {
      return registered;
    }
    Log(LogLevel::kWarning, "cluster_join_slow",
        {{"node", options_.node_name}, {"error", registered.ToString()}});
  }
  if (absl::StatusOr<std::vector<ClusterMember>> members = ListNodes(); members.ok()) {
    MutexLock lock(&mu_);
    members_ = std::move(*members);
  }
  Log(LogLevel::kInfo, "cluster_joined",
      {{"node", options_.node_name},
       {"key", key_},
       {"lease", lease_},
       {"ttl", absl::FormatDuration(granted_ttl_)},
       {"advertise", self_.advertise_address}});
  MutexLock lock(&mu_);
  joined_ = true;
  renewer_ = std::thread([this] { RenewLoop(); });
  return absl::OkStatus();
}

void ClusterMembership::Leave() {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    stopped_.SignalAll();
  }
  if (renewer_.joinable()) renewer_.join();
  if (lease_ == 0) return;
  // Revoking deletes the record at once: others stop listing this node now
  // rather than a TTL later.
  if (absl::Status revoked = etcd_->RevokeLease(lease_); revoked.ok()) {
    Log(LogLevel::kInfo, "cluster_left", {{"node", options_.node_name}, {"lease", lease_}});
  } else {
    Log(LogLevel::kWarning, "cluster_leave_failed",
        {{"node", options_.node_name},
         {"error", revoked.ToString()},
         {"listed_for_at_most", absl::FormatDuration(granted_ttl_)}});
  }
  lease_ = 0;
  current_lease_.store(0, std::memory_order_release);
}

std::vector<ClusterMember> ClusterMembership::members() const {
  MutexLock lock(&mu_);
  return members_;
}

absl::StatusOr<std::vector<ClusterMember>> ClusterMembership::ListNodes() {
  const std::string nodes_prefix = absl::StrCat(options_.prefix, "/nodes/");
  std::vector<EtcdKeyValue> values;
  TENSORD_RETURN_IF_ERROR(
      KvReadPrefix(*etcd_, nodes_prefix, 1000, [&values](std::vector<EtcdKeyValue> page) {
        for (EtcdKeyValue& kv : page) values.push_back(std::move(kv));
      }).status());
  std::vector<ClusterMember> members;
  for (const EtcdKeyValue& value : values) {
    absl::StatusOr<ClusterMember> member = DecodeNodeRecord(value.value);
    const absl::string_view name = absl::string_view(value.key).substr(nodes_prefix.size());
    if (member.ok() && member->node_name != name) {
      member = absl::DataLossError(
          absl::StrCat("the record names node '", member->node_name, "', not '", name, "'"));
    }
    if (!member.ok()) {
      Log(LogLevel::kDebug, "cluster_record_skipped",
          {{"key", value.key}, {"error", member.status().ToString()}});
      continue;
    }
    members.push_back(std::move(*member));
  }
  return members;
}

ClusterMember ClusterMembership::CurrentRecord() {
  ClusterMember record = self_;
  if (capacity_) capacity_(record);
  // The capacity source fills capacity only; identity stays ours.
  record.node_name = self_.node_name;
  record.instance_id = self_.instance_id;
  return record;
}

absl::Status ClusterMembership::Register(int64_t lease, const ClusterMember& record) {
  const std::string encoded = EncodeNodeRecord(record);
  // Bounded: each pass either writes, refuses, or saw the key change under it.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const KvCompare absent = KvCompare::Absent(key_);
    const KvOp put = KvOp::Put(key_, encoded, lease);
    const KvOp get = KvOp::Get(key_);
    TENSORD_ASSIGN_OR_RETURN(KvTxnResult created, etcd_->Txn({&absent, 1}, {&put, 1}, {&get, 1}));
    if (created.succeeded) {
      last_written_record_ = encoded;
      last_written_at_ = absl::Now();
      return absl::OkStatus();
    }
    const std::vector<EtcdKeyValue>& existing = created.results[0].values;
    if (existing.empty()) continue;  // deleted between compare and read: try again
    const EtcdKeyValue& held = existing[0];
    absl::StatusOr<ClusterMember> holder = DecodeNodeRecord(held.value);
    if (!holder.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "etcd key ", key_, " holds something tensord cannot read (", holder.status().message(),
          "); node '", options_.node_name, "' will not overwrite it"));
    }
    if (holder->instance_id != record.instance_id) {
      return absl::AlreadyExistsError(absl::StrCat(
          "node name '", options_.node_name, "' is already registered by a live node (",
          Describe(*holder), "); this node (", Describe(record),
          ") cannot join under the same name. Give it another --node-name, or, if that node was "
          "just killed, wait for its lease to expire (at most its TTL)"));
    }
    // Our own record from an earlier lease: move it to this one.
    const KvCompare unchanged = KvCompare::ModRevisionIs(key_, held.mod_revision);
    TENSORD_ASSIGN_OR_RETURN(KvTxnResult replaced, etcd_->Txn({&unchanged, 1}, {&put, 1}, {}));
    if (replaced.succeeded) {
      last_written_record_ = encoded;
      last_written_at_ = absl::Now();
      return absl::OkStatus();
    }
  }
  return absl::AbortedError(absl::StrCat("etcd key ", key_, " kept changing while node '",
                                         options_.node_name, "' registered; will retry"));
}

absl::Status ClusterMembership::RegisterWithNewLease() {
  TENSORD_ASSIGN_OR_RETURN(EtcdLease lease, etcd_->GrantLease(options_.lease_ttl));
  if (absl::Status registered = Register(lease.id, CurrentRecord()); !registered.ok()) {
    // Not ours to keep: a lease with no key would only expire later.
    etcd_->RevokeLease(lease.id).IgnoreError();
    if (registered.code() == absl::StatusCode::kNotFound) {
      // The lease ran out between its grant and its first use: etcd
      // answered more slowly than the TTL, which a start waits out.
      return KvTimedOut(
          absl::StrCat("the lease etcd granted (TTL ", absl::FormatDuration(lease.ttl),
                       ") expired before the registration could use it: ", registered.message()));
    }
    return registered;
  }
  lease_ = lease.id;
  current_lease_.store(lease.id, std::memory_order_release);
  granted_ttl_ = lease.ttl;
  return absl::OkStatus();
}

absl::Status ClusterMembership::RenewOnce() {
  if (lease_ == 0) {
    TENSORD_RETURN_IF_ERROR(RegisterWithNewLease());
    Log(LogLevel::kInfo, "cluster_registered_again",
        {{"node", options_.node_name}, {"lease", lease_}});
  } else {
    absl::StatusOr<absl::Duration> ttl = etcd_->KeepAliveOnce(lease_);
    if (ttl.status().code() == absl::StatusCode::kNotFound) {
      // etcd lost the lease (it expired while etcd was out of reach): the
      // record went with it. Register afresh.
      Log(LogLevel::kWarning, "cluster_lease_lost",
          {{"node", options_.node_name}, {"lease", lease_}});
      lease_ = 0;
      current_lease_.store(0, std::memory_order_release);
      return RenewOnce();
    }
    TENSORD_RETURN_IF_ERROR(ttl.status());
  }
  const ClusterMember record = CurrentRecord();
  const std::string encoded = EncodeNodeRecord(record);
  if (encoded != last_written_record_ && absl::Now() - last_written_at_ >= granted_ttl_) {
    // Only while the key is still on our lease; otherwise register again
    // (someone deleted it, or took the name while we could not renew).
    const KvCompare ours = KvCompare::LeaseIs(key_, lease_);
    const KvOp put = KvOp::Put(key_, encoded, lease_);
    TENSORD_ASSIGN_OR_RETURN(KvTxnResult updated, etcd_->Txn({&ours, 1}, {&put, 1}, {}));
    if (updated.succeeded) {
      last_written_record_ = encoded;
      last_written_at_ = absl::Now();
    } else {
      TENSORD_RETURN_IF_ERROR(Register(lease_, record));
    }
  }
  TENSORD_ASSIGN_OR_RETURN(std::vector<ClusterMember> members, ListNodes());
  // The record can go while the lease lives (an etcdctl del, etcd restored
  // from a backup): keep-alives alone would never bring it back.
  if (std::none_of(members.begin(), members.end(), [&](const ClusterMember& member) {
        return member.instance_id == record.instance_id;
      })) {
    Log(LogLevel::kWarning, "cluster_record_missing",
        {{"node", options_.node_name}, {"lease", lease_}});
    TENSORD_RETURN_IF_ERROR(Register(lease_, record));
    TENSORD_ASSIGN_OR_RETURN(members, ListNodes());
  }
  MutexLock lock(&mu_);
  members_ = std::move(members);
  return absl::OkStatus();
}

void ClusterMembership::NoteFailure(absl::string_view where, const absl::Status& status) {
  if (status.code() == absl::StatusCode::kAlreadyExists ||
      status.code() == absl::StatusCode::kFailedPrecondition) {
    // Not an outage: the name was taken while we were away, and the
    // operator must act. Logged once until it resolves, like an outage.
    name_conflict_log_.Note(where, status.ToString(), absl::Now());
    return;
  }
  unreachable_log_.Note(where, status.ToString(), absl::Now());
}

void ClusterMembership::RenewLoop() {
  absl::Duration retry = kFirstRetry;
  bool failing = false;
  while (true) {
    const absl::Status renewed = RenewOnce();
    absl::Duration wait = granted_ttl_ / 3;
    if (renewed.ok()) {
      if (failing) {
        Log(LogLevel::kInfo, "etcd_reachable_again",
            {{"node", options_.node_name}, {"lease", lease_}});
      }
      failing = false;
      retry = kFirstRetry;
      unreachable_log_.Tick(absl::Now());
      name_conflict_log_.Tick(absl::Now());
    } else {
      failing = true;
      NoteFailure("cluster membership renewal", renewed);
      wait = std::min(retry, wait);
      retry = std::min(retry * 2, granted_ttl_ / 3);
    }
    const absl::Time wake_at = absl::Now() + wait;
    MutexLock lock(&mu_);
    while (!stopping_ && !stopped_.WaitWithDeadline(&mu_, wake_at)) {
    }
    if (stopping_) return;
  }
}

}  // namespace tensord
