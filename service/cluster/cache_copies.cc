#include "service/cluster/cache_copies.h"

#include <grpcpp/grpcpp.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "service/cluster/rendezvous.h"
#include "service/wire/status_conversion.h"
#include "tensord/v1/tensor_service.grpc.pb.h"

namespace tensord {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(2);
// Announcements wait this long for company before they go.
constexpr absl::Duration kLinger = absl::Milliseconds(5);

}  // namespace

CacheCopies::CacheCopies(CacheCopiesOptions options, Registry& registry, MemberList& members,
                         PeerChannels& peers)
    : options_(std::move(options)), registry_(registry), members_(members), peers_(peers) {
  sender_ = std::thread([this] { SendLoop(); });
}

CacheCopies::~CacheCopies() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    queued_cv_.SignalAll();
  }
  sender_.join();
}

std::optional<ClusterMember> CacheCopies::HomeOf(absl::string_view name) const {
  return members_.FirstRanked(name);
}

void CacheCopies::Announce(const VersionInfo& info) {
  std::optional<ClusterMember> home = HomeOf(info.name);
  if (!home.has_value() || home->node_name == options_.self) return;  // Find sees it here
  MutexLock lock(&mu_);
  if (queued_ >= options_.max_queued) {
    ++dropped_;
    return;
  }
  outgoing_[home->node_name].push_back(CopyLocation{.name = info.name,
                                                    .node = options_.self,
                                                    .version = info.version,
                                                    .total_bytes = info.total_bytes,
                                                    .crc32c = info.crc32c});
  ++queued_;
  // The sender wakes for the first announcement (then lingers for company)
  // and for a full batch; waking it for each one would send each alone.
  if (queued_ == 1 || queued_ >= options_.batch) queued_cv_.Signal();
}

void CacheCopies::Remember(std::vector<CopyLocation> copies) {
  MutexLock lock(&mu_);
  for (CopyLocation& copy : copies) {
    auto [it, added] = places_.insert_or_assign(copy.name, copy);
    if (added) arrival_.push_back(std::move(copy.name));
  }
  while (places_.size() > options_.max_locations && !arrival_.empty()) {
    places_.erase(arrival_.front());
    arrival_.pop_front();
  }
  // Names replaced in place leave stale entries in arrival_: bounded by
  // rebuilding when it grows far past the places it orders.
  if (arrival_.size() > 2 * options_.max_locations) {
    std::deque<std::string> live;
    for (std::string& name : arrival_) {
      if (places_.contains(name)) live.push_back(std::move(name));
    }
    arrival_.swap(live);
  }
}

absl::StatusOr<CopyLocation> CacheCopies::Find(absl::string_view name) const {
  // This node's own cache copy first: announced to nobody, it is here.
  if (absl::StatusOr<VersionInfo> own = registry_.Stat(name, 0);
      own.ok() && own->retention == Retention::kCache && own->origin == 0) {
    return CopyLocation{.name = own->name,
                        .node = options_.self,
                        .version = own->version,
                        .total_bytes = own->total_bytes,
                        .crc32c = own->crc32c};
  }
  MutexLock lock(&mu_);
  auto it = places_.find(name);
  if (it == places_.end()) {
    return absl::NotFoundError(absl::StrCat("no cache copy of '", name, "' was announced here"));
  }
  return it->second;
}

absl::StatusOr<CopyLocation> CacheCopies::Locate(const std::string& name) {
  std::optional<ClusterMember> home = HomeOf(name);
  if (!home.has_value()) return absl::NotFoundError("no live member");
  if (home->node_name == options_.self) return Find(name);
  grpc::ClientContext context;
  peers_.Prepare(context, kCallTimeout);
  v1::LocateCopyRequest request;
  request.set_name(name);
  v1::LocateCopyResponse response;
  std::unique_ptr<v1::TensorService::Stub> stub =
      v1::TensorService::NewStub(peers_.ChannelTo(home->advertise_address));
  const grpc::Status status = stub->LocateCopy(&context, request, &response);
  if (!status.ok()) {
    const absl::Status failed = FromGrpcStatus(status);
    // An unreachable home is a miss for a cache name, said as such.
    return absl::NotFoundError(absl::StrCat("the home of cache name '", name, "', node ",
                                            home->node_name, ", answered: ", failed.message()));
  }
  const v1::CopyLocation& location = response.location();
  if (location.name() != name || location.node().empty()) {
    return absl::NotFoundError(
        absl::StrCat("node ", home->node_name, " answered the place of '", name, "' with another"));
  }
  return CopyLocation{.name = location.name(),
                      .node = location.node(),
                      .version = location.version(),
                      .total_bytes = location.total_bytes(),
                      .crc32c = location.crc32c()};
}

void CacheCopies::SendLoop() {
  while (true) {
    std::map<std::string, std::vector<CopyLocation>> sending;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && queued_ == 0) queued_cv_.Wait(&mu_);
      if (stopping_) return;
      // A little company for the first announcement, unless a batch is full.
      if (queued_ < options_.batch) queued_cv_.WaitWithTimeout(&mu_, kLinger);
      if (stopping_) return;
      sending.swap(outgoing_);
      queued_ = 0;
    }
    for (auto& [home, copies] : sending) {
      std::optional<ClusterMember> member = members_.Find(home);
      if (!member.has_value()) continue;  // gone: its places go with it
      std::unique_ptr<v1::TensorService::Stub> stub =
          v1::TensorService::NewStub(peers_.ChannelTo(member->advertise_address));
      for (size_t start = 0; start < copies.size(); start += options_.batch) {
        v1::AnnounceCopiesRequest request;
        for (size_t i = start; i < std::min(copies.size(), start + options_.batch); ++i) {
          v1::CopyLocation* out = request.add_copies();
          out->set_name(copies[i].name);
          out->set_node(copies[i].node);
          out->set_version(copies[i].version);
          out->set_total_bytes(copies[i].total_bytes);
          out->set_crc32c(copies[i].crc32c);
        }
        grpc::ClientContext context;
        peers_.Prepare(context, kCallTimeout);
        v1::AnnounceCopiesResponse response;
        // Lost announcements are misses later, nothing worse.
        stub->AnnounceCopies(&context, request, &response).ok();
      }
    }
  }
}

size_t CacheCopies::locations() const {
  MutexLock lock(&mu_);
  return places_.size();
}

uint64_t CacheCopies::dropped_announcements() const {
  MutexLock lock(&mu_);
  return dropped_;
}

}  // namespace tensord
