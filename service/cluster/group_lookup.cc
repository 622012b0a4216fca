#include "service/cluster/group_lookup.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "service/cluster/name_record.h"
#include "service/common/mutex.h"
#include "service/common/status_macros.h"

namespace tensord {

absl::StatusOr<GroupMembers> FindGroupAt(KvStore& store, absl::string_view prefix, int64_t revision,
                                         absl::Duration patience) {
  if (revision <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster group ", revision, " names no etcd revision"));
  }
  // The index knows every whole group this version of tensord wrote.
  const std::string index_prefix = GroupIndexPrefix(prefix);
  TENSORD_ASSIGN_OR_RETURN(std::vector<EtcdKeyValue> indexed,
                           store.KeysCreatedAt(index_prefix, KvPrefixEnd(index_prefix), revision));
  if (indexed.size() > 1) {
    return absl::InternalError(absl::StrCat("cluster version ", revision, " created ",
                                            indexed.size(), " group index keys"));
  }
  if (indexed.size() == 1) return DecodeGroupIndex(prefix, indexed.front());
  // Not indexed: a group that broke since (its key removed), a revision
  // that ordered none, or a group tensord wrote before the index; etcd's
  // history tells which while it keeps that revision.
  const std::string names_prefix = NameRecordPrefix(prefix);
  // A revision etcd has not reached yet has no history to replay: the
  // watch would wait for it instead of answering.
  TENSORD_ASSIGN_OR_RETURN(KvPage now,
                           store.Range(names_prefix, KvPrefixEnd(names_prefix), 0, /*limit=*/1));
  if (revision > now.revision) {
    return absl::NotFoundError(absl::StrCat("no atomic group was ordered at cluster version ",
                                            revision, ": etcd is at revision ", now.revision));
  }
  std::vector<EtcdKeyValue> written;  // the records written at `revision`
  bool answered = false;              // the first change at or after it came
  auto on_events = [&](std::vector<EtcdWatchEvent> events) {
    if (events.empty()) return true;  // established
    for (EtcdWatchEvent& event : events) {
      if (!event.deleted && event.kv.mod_revision == revision)
        written.push_back(std::move(event.kv));
    }
    // A revision's changes are never split across calls, and the watch
    // starts at `revision`: this call holds all of them, or there are none.
    answered = true;
    return false;
  };
  // History is replayed at once; a watch that hears nothing means no name
  // record changed since `revision`, so none changed at it.
  KvWatchCancel cancel;
  Notification finished;
  std::thread watchdog([&] {
    if (!finished.WaitForNotificationWithTimeout(patience)) cancel.Cancel();
  });
  const absl::Status watched = store.Watch(names_prefix, revision, on_events, cancel);
  finished.Notify();
  watchdog.join();
  if (watched.code() == absl::StatusCode::kOutOfRange) {
    return absl::NotFoundError(
        absl::StrCat("no whole atomic group was ordered at cluster version ", revision,
                     ": the group index has none, and etcd's history has been compacted past it (",
                     watched.message(), "), so a group that broke since cannot be told from none"));
  }
  if (!watched.ok() && !(watched.code() == absl::StatusCode::kCancelled && !answered)) {
    return watched;
  }
  GroupMembers members;
  for (const EtcdKeyValue& kv : written) {
    absl::StatusOr<NameRecord> record = DecodeNameRecord(prefix, kv);
    // A record rewritten later (a replica joining its holders) keeps its
    // group and its own origin: the group was not ordered here.
    if (!record.ok() || record->group.empty() || record->origin != revision) continue;
    if (!members.group.empty() && members.group != record->group) {
      return absl::InternalError(absl::StrCat("cluster version ", revision,
                                              " wrote records of two groups, '", members.group,
                                              "' and '", record->group, "'"));
    }
    members.group = record->group;
    members.names.push_back(record->name);
  }
  if (members.names.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no atomic group was ordered at cluster version ", revision,
        written.empty()
            ? " (no name record was written at it)"
            : absl::StrCat(" (it wrote ", written.size(), " name records outside any group)")));
  }
  std::sort(members.names.begin(), members.names.end());
  return members;
}

absl::StatusOr<std::vector<Lease>> WholeGroup(int64_t revision, const GroupMembers& members,
                                              std::vector<absl::StatusOr<Lease>> leases) {
  if (leases.size() != members.names.size()) {
    return absl::InternalError(absl::StrCat("cluster group ", revision, " has ",
                                            members.names.size(), " items; ", leases.size(),
                                            " were read"));
  }
  std::vector<Lease> whole;
  whole.reserve(leases.size());
  for (size_t i = 0; i < leases.size(); ++i) {
    const std::string& name = members.names[i];
    if (!leases[i].ok()) {
      const absl::Status& failed = leases[i].status();
      if (failed.code() == absl::StatusCode::kNotFound) {
        return absl::NotFoundError(absl::StrCat("cluster group ", revision,
                                                " is no longer whole: its tensor '", name,
                                                "' has been deleted since"));
      }
      return absl::Status(failed.code(), absl::StrCat("cluster group ", revision, ", tensor '",
                                                      name, "': ", failed.message()));
    }
    const int64_t origin = (*leases[i])->origin.load(std::memory_order_relaxed);
    if (origin != revision) {
      return absl::NotFoundError(absl::StrCat("cluster group ", revision,
                                              " is no longer whole: its tensor '", name,
                                              "' is now cluster version ", origin));
    }
    whole.push_back(*std::move(leases[i]));
  }
  return whole;
}

}  // namespace tensord
