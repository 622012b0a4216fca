#include "service/cluster/member_list.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "service/cluster/node_record.h"
#include "service/cluster/rendezvous.h"
#include "service/common/log.h"

namespace tensord {

std::string MemberList::NodesPrefix(absl::string_view prefix) {
  return absl::StrCat(prefix, "/nodes/");
}

MemberList::MemberList(std::shared_ptr<KvStore> store, std::string prefix)
    : nodes_prefix_(NodesPrefix(prefix)) {
  follower_ = std::make_unique<PrefixFollower>(
      std::move(store), nodes_prefix_, /*read_first=*/true, "cluster members",
      PrefixFollowerCallbacks{.on_read =
                                  [this](std::vector<EtcdKeyValue> keys, int64_t) {
                                    MutexLock lock(&mu_);
                                    members_.clear();
                                    for (const EtcdKeyValue& kv : keys)
                                      Apply(kv, /*deleted=*/false);
                                    ++generation_;
                                  },
                              .on_events =
                                  [this](std::vector<EtcdWatchEvent> events) {
                                    MutexLock lock(&mu_);
                                    for (const EtcdWatchEvent& event : events)
                                      Apply(event.kv, event.deleted);
                                    ++generation_;
                                  }});
}

MemberList::~MemberList() { Stop(); }

void MemberList::Start() { follower_->Start(); }
void MemberList::Stop() { follower_->Stop(); }

bool MemberList::AwaitFirstRead(absl::Duration timeout) const {
  return follower_->AwaitRevision(1, timeout);
}

void MemberList::Apply(const EtcdKeyValue& kv, bool deleted) {
  absl::string_view name = kv.key;
  if (!absl::ConsumePrefix(&name, nodes_prefix_)) return;
  if (deleted) {
    if (auto it = members_.find(name); it != members_.end()) members_.erase(it);
    return;
  }
  absl::StatusOr<ClusterMember> member = DecodeNodeRecord(kv.value);
  if (member.ok() && member->node_name != name) {
    member = absl::DataLossError(
        absl::StrCat("the record names node '", member->node_name, "', not '", name, "'"));
  }
  if (!member.ok()) {
    // Not trusted as a member: a key that does not decode names nobody.
    Log(LogLevel::kDebug, "cluster_record_skipped",
        {{"key", kv.key}, {"error", member.status().ToString()}});
    if (auto it = members_.find(name); it != members_.end()) members_.erase(it);
    return;
  }
  members_[std::string(name)] = *std::move(member);
}

std::vector<ClusterMember> MemberList::members() const {
  MutexLock lock(&mu_);
  std::vector<ClusterMember> out;
  out.reserve(members_.size());
  for (const auto& [name, member] : members_) out.push_back(member);
  return out;
}

std::optional<ClusterMember> MemberList::FirstRanked(absl::string_view name) const {
  MutexLock lock(&mu_);
  const ClusterMember* best = nullptr;
  uint32_t best_weight = 0;
  for (const auto& [node, member] : members_) {
    const uint32_t weight = RendezvousWeight(name, node);
    if (best == nullptr || RanksBefore(weight, node, best_weight, best->node_name)) {
      best = &member;
      best_weight = weight;
    }
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

std::optional<ClusterMember> MemberList::Find(absl::string_view node) const {
  MutexLock lock(&mu_);
  auto it = members_.find(node);
  if (it == members_.end()) return std::nullopt;
  return it->second;
}

uint64_t MemberList::generation() const {
  MutexLock lock(&mu_);
  return generation_;
}

}  // namespace tensord
