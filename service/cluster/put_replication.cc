#include "service/cluster/put_replication.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "service/common/crc32c.h"
#include "service/common/log.h"
#include "service/common/tensor_name.h"
#include "service/wire/status_conversion.h"
#include "tensord/v1/tensor_service.grpc.pb.h"

namespace tensord {

absl::StatusOr<std::vector<ReplicaRule>> ParseReplicaRules(absl::string_view text) {
  std::vector<ReplicaRule> rules;
  for (absl::string_view entry : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    ReplicaRule rule;
    absl::string_view count = entry;
    if (const size_t equals = entry.rfind('='); equals != absl::string_view::npos) {
      rule.prefix = std::string(entry.substr(0, equals));
      count = entry.substr(equals + 1);
      if (absl::Status valid = ValidateNamePrefix(rule.prefix); !valid.ok() || rule.prefix.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--default-replicas entry '", entry, "': '", rule.prefix, "' is not a name prefix"));
      }
    }
    if (!absl::SimpleAtoi(count, &rule.replicas) || rule.replicas < 1 ||
        rule.replicas > kMaxReplicas) {
      return absl::InvalidArgumentError(absl::StrCat("--default-replicas entry '", entry,
                                                     "': copies must be 1..", kMaxReplicas));
    }
    for (const ReplicaRule& earlier : rules) {
      if (earlier.prefix == rule.prefix) {
        return absl::InvalidArgumentError(absl::StrCat("--default-replicas gives '", rule.prefix,
                                                       "' twice"));
      }
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

PutReplication::PutReplication(std::shared_ptr<ClusterDirectory> directory,
                               ReadThrough& read_through,
                               std::shared_ptr<const ClusterView> members, Registry& registry,
                               PutReplicationOptions options)
    : directory_(std::move(directory)),
      read_through_(read_through),
      members_(std::move(members)),
      registry_(registry),
      options_(std::move(options)) {}

absl::StatusOr<uint32_t> PutReplication::ReplicasFor(absl::string_view name,
                                                     uint32_t requested) const {
  uint32_t replicas = requested;
  if (replicas == 0) {
    replicas = 1;
    size_t longest = 0;
    for (const ReplicaRule& rule : options_.defaults) {
      if (absl::StartsWith(name, rule.prefix) && (rule.prefix.size() >= longest)) {
        longest = rule.prefix.size();
        replicas = rule.replicas;
      }
    }
  }
  if (replicas > kMaxReplicas) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas=", replicas, " for '", name, "' is more than ", kMaxReplicas));
  }
  if (replicas <= 1) return replicas;
  const std::vector<ClusterMember> live = LiveMembers(replicas);
  if (live.size() < replicas) {
    std::vector<std::string> names;
    for (const ClusterMember& member : live) names.push_back(member.node_name);
    return absl::FailedPreconditionError(absl::StrCat(
        "replicas=", replicas, " for '", name, "' needs ", replicas, " live nodes; the cluster has ",
        live.size(), " (", absl::StrJoin(names, ", "), ")"));
  }
  return replicas;
}

std::vector<ClusterMember> PutReplication::LiveMembers(size_t needed) const {
  std::vector<ClusterMember> live = members_->members();
  if (live.size() < needed && options_.read_members) {
    if (absl::StatusOr<std::vector<ClusterMember>> fresh = options_.read_members(); fresh.ok()) {
      live = *std::move(fresh);
    }
  }
  return live;
}

std::vector<ClusterMember> PutReplication::ChooseTargets(absl::string_view name,
                                                         std::vector<ClusterMember> nodes,
                                                         absl::string_view self, size_t count) {
  std::vector<std::pair<uint32_t, ClusterMember>> scored;
  for (ClusterMember& node : nodes) {
    if (node.node_name == self) continue;
    const std::string key = absl::StrCat(name, "#", node.node_name);
    scored.emplace_back(Crc32c(key.data(), key.size()), std::move(node));
  }
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second.node_name < b.second.node_name;
  });
  std::vector<ClusterMember> chosen;
  for (size_t i = 0; i < scored.size() && chosen.size() < count; ++i) {
    chosen.push_back(std::move(scored[i].second));
  }
  return chosen;
}

void PutReplication::AfterPut(std::string name, uint64_t version, uint32_t replicas, Done done) {
  auto shared_done = std::make_shared<Done>(std::move(done));
  directory_->AfterRegistered(
      version, options_.register_timeout,
      [this, name = std::move(name), version, replicas, shared_done](absl::Status registered) mutable {
        if (replicas <= 1) {
          // The put stands on this node either way; the registrar keeps
          // trying, and readers elsewhere find it once it is registered.
          if (!registered.ok()) {
            Log(LogLevel::kInfo, "cluster_put_not_yet_registered",
                {{"name", name}, {"version", version}, {"reason", registered.message()}});
          }
          std::move(*shared_done)(absl::OkStatus());
          return;
        }
        if (!registered.ok()) {
          std::move(*shared_done)(absl::UnavailableError(absl::StrCat(
              "'", name, "' v", version, " is published on this node, but its ", replicas,
              " copies could not be made: ", registered.message())));
          return;
        }
        SendReplicas(std::move(name), version, replicas, std::move(*shared_done));
      });
}

namespace {

// One put's copies in flight: the ranked candidates, the calls running,
// and what came back. A target that fails (a node killed but still listed
// within its TTL) hands its copy to the next candidate.
struct ReplicaRound : std::enable_shared_from_this<ReplicaRound> {
  struct Call {
    grpc::ClientContext context;
    v1::ReplicateResponse response;
    std::unique_ptr<v1::TensorService::Stub> stub;
    std::string node;
  };

  std::vector<ClusterMember> candidates;  // best first
  // One per candidate, taken up front: the round may outlive the node's
  // pull threads at shutdown, so it holds its channels itself.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  v1::ReplicateRequest request;
  std::string bearer_token;
  absl::Duration timeout;
  size_t wanted = 0;
  ClusterReads::Done done;

  std::mutex mu;
  size_t next_candidate = 0;  // guarded by mu
  size_t succeeded = 0;       // guarded by mu
  size_t running = 0;         // guarded by mu
  std::vector<std::string> failures;  // guarded by mu

  // Starts calls until `wanted` succeeded or are running, while candidates last.
  void Launch() {
    std::vector<size_t> starting;
    {
      std::lock_guard<std::mutex> lock(mu);
      while (succeeded + running < wanted && next_candidate < candidates.size()) {
        starting.push_back(next_candidate++);
        ++running;
      }
    }
    for (size_t candidate : starting) Send(candidate);
  }

  void Send(size_t candidate) {
    auto call = std::make_shared<Call>();
    call->node = candidates[candidate].node_name;
    call->context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    if (!bearer_token.empty()) {
      call->context.AddMetadata("authorization", absl::StrCat("Bearer ", bearer_token));
    }
    call->stub = v1::TensorService::NewStub(channels[candidate]);
    Call* raw = call.get();
    raw->stub->async()->Replicate(&raw->context, &request, &raw->response,
                                  [self = shared_from_this(), call](grpc::Status status) {
                                    self->Answered(*call, status);
                                  });
  }

  void Answered(const Call& call, const grpc::Status& status) {
    bool finished = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      --running;
      if (status.ok()) {
        ++succeeded;
      } else {
        failures.push_back(absl::StrCat(call.node, ": ", FromGrpcStatus(status).ToString()));
      }
      finished = running == 0 && (succeeded >= wanted || next_candidate >= candidates.size());
    }
    if (!finished) {
      Launch();
      return;
    }
    absl::Status outcome;
    if (succeeded < wanted) {
      outcome = absl::UnavailableError(absl::StrCat(
          "'", request.name(), "' is published on this node, but only ", succeeded, " of its ",
          wanted, " copies could be made: ", absl::StrJoin(failures, "; ")));
    }
    std::move(done)(outcome);
  }
};

}  // namespace

void PutReplication::SendReplicas(std::string name, uint64_t version, uint32_t replicas,
                                  Done done) {
  const int64_t origin = directory_->OriginOf(name, version);
  absl::StatusOr<VersionInfo> info = registry_.Stat(name, version);
  if (!info.ok() || origin == INT64_MAX) {
    std::move(done)(absl::AbortedError(absl::StrCat(
        "'", name, "' v", version, " was replaced or removed before its copies were made")));
    return;
  }
  // The members read now, not the list kept since the last renewal: a put
  // with copies is worth one etcd read to see every live node.
  std::vector<ClusterMember> live = members_->members();
  if (options_.read_members) {
    if (absl::StatusOr<std::vector<ClusterMember>> fresh = options_.read_members(); fresh.ok()) {
      live = *std::move(fresh);
    }
  }
  std::vector<ClusterMember> ranked =
      ChooseTargets(name, std::move(live), directory_->options().node_name, kMaxReplicas * 4);
  if (ranked.size() + 1 < replicas) {
    std::move(done)(absl::UnavailableError(absl::StrCat(
        "'", name, "' is published on this node, but only ", ranked.size(),
        " other live nodes can take its ", replicas - 1, " copies")));
    return;
  }
  // A few fallbacks beyond the copies wanted: enough for nodes killed but
  // still listed; more would only delay the answer.
  constexpr size_t kFallbacks = 4;
  if (ranked.size() > replicas - 1 + kFallbacks) ranked.resize(replicas - 1 + kFallbacks);
  auto round = std::make_shared<ReplicaRound>();
  for (const ClusterMember& candidate : ranked) {
    round->channels.push_back(read_through_.ChannelTo(candidate.advertise_address));
  }
  round->candidates = std::move(ranked);
  round->request.set_name(name);
  round->request.set_source_node(directory_->options().node_name);
  round->request.set_source_address(directory_->options().advertise_address);
  round->request.set_source_version(version);
  round->request.set_origin(origin);
  round->request.set_total_bytes(info->total_bytes);
  round->request.set_crc32c(info->crc32c);
  round->bearer_token = read_through_.bearer_token();
  round->timeout = options_.replicate_timeout;
  round->wanted = replicas - 1;
  round->done = std::move(done);
  round->Launch();
}

void PutReplication::Replicate(ClusterVersion source, Done done) {
  auto shared_done = std::make_shared<Done>(std::move(done));
  read_through_.Enqueue(
      [this, source = std::move(source), shared_done]() mutable {
        // The caller names the version; the directory says where it is and
        // what it is, so a caller cannot point this node (and its token)
        // at another host or claim an origin that was never registered.
        absl::StatusOr<HolderRecord> holder = directory_->HolderOf(source.name, source.node);
        if (holder.ok() && (holder->version != source.version || holder->origin != source.origin)) {
          holder = absl::FailedPreconditionError(absl::StrCat(
              "node ", source.node, " holds '", source.name, "' v", holder->version, " (origin ",
              holder->origin, "), not v", source.version, " (origin ", source.origin, ")"));
        }
        if (!holder.ok()) {
          std::move(*shared_done)(holder.status());
          return;
        }
        absl::Status status;
        for (int attempt = 0; attempt < 3; ++attempt) {
          const uint64_t held = registry_.LatestVersionOf(source.name);
          if (held != 0 && directory_->OriginOf(source.name, held) >= holder->origin) {
            status = absl::OkStatus();  // this node has it, or newer
            break;
          }
          status = read_through_.PullFrom(*holder, held, Retention::kDefault);
          if (status.code() != absl::StatusCode::kAborted) break;
        }
        if (!status.ok()) {
          std::move(*shared_done)(status);
          return;
        }
        directory_->AfterRegistered(registry_.LatestVersionOf(source.name),
                                    options_.register_timeout, std::move(*shared_done));
      },
      [shared_done] {
        std::move(*shared_done)(absl::UnavailableError("the node is shutting down"));
      });
}

}  // namespace tensord
