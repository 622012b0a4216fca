#include "service/cluster/record_follower.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "service/cluster/name_record.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/common/tensor_name.h"

namespace tensord {
namespace {

// Keys per page of a listing read.
constexpr int64_t kPageKeys = 1000;

VersionInfo ItemOf(const NameRecord& record) {
  VersionInfo item;
  item.name = record.name;
  // Across nodes a version is known by its cluster order.
  item.version = static_cast<uint64_t>(record.origin);
  item.origin = record.origin;
  item.total_bytes = record.total_bytes;
  item.crc32c = record.crc32c;
  item.node = record.writer;
  return item;
}

}  // namespace

RecordFollower::RecordFollower(std::shared_ptr<KvStore> store, std::string prefix,
                               LatestReads& latest, size_t history_items,
                               std::function<void()> on_gap)
    : store_(std::move(store)),
      prefix_(std::move(prefix)),
      records_prefix_(NameRecordPrefix(prefix_)),
      latest_(latest),
      on_gap_(std::move(on_gap)),
      changes_(history_items) {
  follower_ = std::make_unique<PrefixFollower>(
      store_, records_prefix_, /*read_first=*/false, "cluster name records",
      PrefixFollowerCallbacks{
          .on_gap =
              [this](int64_t missed_after, int64_t resumed_at) {
                // Watchers positioned before it are told they may have missed
                // some: at the start, everything before the node joined.
                changes_.RestartHistoryAt(static_cast<uint64_t>(resumed_at));
                if (missed_after > 0 && on_gap_) on_gap_();
              },
          .on_events = [this](std::vector<EtcdWatchEvent> events) { Apply(std::move(events)); }});
}

RecordFollower::~RecordFollower() { Stop(); }

void RecordFollower::Start() {
  // Positions start where the node joined: earlier ones were never seen.
  follower_->Start();
}

void RecordFollower::Stop() { follower_->Stop(); }

void RecordFollower::Apply(std::vector<EtcdWatchEvent> events) {
  const int64_t revision = events.back().kv.mod_revision;
  ChangeEvent published{.kind = ChangeEvent::Kind::kPublished,
                        .version = static_cast<uint64_t>(revision)};
  ChangeEvent deleted{.kind = ChangeEvent::Kind::kDeleted,
                      .version = static_cast<uint64_t>(revision)};
  // An atomic group is one transaction of records naming one group; other
  // puts may share a revision (a group commit) without being one.
  std::string group;
  bool one_group = true;
  for (const EtcdWatchEvent& event : events) {
    absl::string_view name = event.kv.key;
    if (!absl::ConsumePrefix(&name, records_prefix_) || !ValidateTensorName(name).ok()) continue;
    if (event.deleted) {
      latest_.DropStaleCopy(std::string(name), event.kv.mod_revision);
      VersionInfo item;
      item.name = std::string(name);
      // A delete carries no version: an empty byte tensor describes it.
      item.layout.dtype = DLDataType{kDLUInt, 8, 1};
      item.layout.shape = {0};
      deleted.items.push_back(std::move(item));
      continue;
    }
    absl::StatusOr<NameRecord> record = DecodeNameRecord(prefix_, event.kv);
    if (!record.ok()) {
      Log(LogLevel::kWarning, "cluster_record_skipped", {{"error", record.status().ToString()}});
      continue;
    }
    latest_.DropStaleCopy(record->name, record->origin);
    // A holder joining an ordered version is not a change of the name.
    if (RecordValueOrdersAVersion(event.kv.value)) {
      if (published.items.empty()) group = record->group;
      one_group = one_group && !record->group.empty() && record->group == group;
      published.items.push_back(ItemOf(*record));
    }
  }
  // One revision is one change (the committer never mixes puts, deletes and
  // groups in one transaction): an atomic group's items are one event.
  if (!published.items.empty()) {
    published.atomic_group = one_group;
    changes_.Append(std::move(published));
  } else if (!deleted.items.empty()) {
    changes_.Append(std::move(deleted));
  }
}

absl::StatusOr<WatchStart> RecordFollower::StartWatch(absl::string_view prefix, bool with_existing,
                                                      uint64_t from_version, size_t max_existing) {
  TENSORD_RETURN_IF_ERROR(ValidateNamePrefix(prefix));
  WatchStart start;
  if (from_version > 0) {
    start.position = from_version;
    return start;
  }
  if (!with_existing) {
    // The store's revision now: everything after it reaches the feed.
    TENSORD_ASSIGN_OR_RETURN(const int64_t now, KvRevisionNow(*store_));
    start.position = static_cast<uint64_t>(now);
    return start;
  }
  const std::string from = absl::StrCat(records_prefix_, prefix);
  absl::Status too_many;
  TENSORD_ASSIGN_OR_RETURN(
      int64_t revision, KvReadPrefix(*store_, from, kPageKeys, [&](std::vector<EtcdKeyValue> page) {
        for (const EtcdKeyValue& kv : page) {
          if (!too_many.ok()) return;
          absl::StatusOr<NameRecord> record = DecodeNameRecord(prefix_, kv);
          if (!record.ok()) continue;
          if (start.existing.size() == max_existing) {
            too_many = absl::OutOfRangeError(absl::StrCat(
                "more than ", max_existing, " names in the cluster start with '", prefix,
                "', the most a watch sends as existing; watch a narrower prefix"));
            return;
          }
          start.existing.push_back(ItemOf(*record));
        }
      }));
  TENSORD_RETURN_IF_ERROR(too_many);
  start.position = static_cast<uint64_t>(revision);
  return start;
}

absl::StatusOr<std::vector<ClusterVersion>> RecordFollower::ListNames(absl::string_view prefix,
                                                                      absl::string_view after,
                                                                      size_t max_names) {
  std::vector<ClusterVersion> names;
  const std::string first = absl::StrCat(records_prefix_, prefix);
  std::string from =
      after.empty() ? first : absl::StrCat(records_prefix_, after, std::string(1, '\0'));
  if (from < first) from = first;
  const std::string end = KvPrefixEnd(first);
  while (names.size() < max_names) {
    const int64_t want =
        std::min<int64_t>(kPageKeys, static_cast<int64_t>(max_names - names.size()));
    TENSORD_ASSIGN_OR_RETURN(KvPage page, KvRangePage(*store_, from, end, 0, want));
    for (const EtcdKeyValue& kv : page.values) {
      absl::StatusOr<NameRecord> record = DecodeNameRecord(prefix_, kv);
      if (!record.ok()) continue;
      names.push_back(ClusterVersion{.name = record->name,
                                     .writer = record->writer,
                                     .origin = record->origin,
                                     .total_bytes = record->total_bytes,
                                     .crc32c = record->crc32c});
    }
    if (!page.more || page.values.empty()) break;
    from = page.values.back().key + std::string(1, '\0');
  }
  return names;
}

}  // namespace tensord
