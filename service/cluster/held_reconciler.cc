#include "service/cluster/held_reconciler.h"

#include <algorithm>
#include <future>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/cluster/name_record.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"

namespace tensord {
namespace {

// Versions per registry page (and so per batch of record reads).
constexpr uint32_t kPage = 1000;

std::vector<RecordReader::Answer> ReadRecords(RecordReader& records,
                                              std::vector<std::string> names) {
  std::promise<std::vector<RecordReader::Answer>> answered;
  std::future<std::vector<RecordReader::Answer>> answers = answered.get_future();
  records.Read(std::move(names), [&answered](std::vector<RecordReader::Answer> got) {
    answered.set_value(std::move(got));
  });
  return answers.get();
}

bool Holds(const NameRecord& record, const std::string& node) {
  return std::find(record.holders.begin(), record.holders.end(), node) != record.holders.end();
}

// Orders each unordered version of `fresh` that has no record yet, in
// transactions that succeed only if every name is still without one (the
// first join of a cluster: all of them); a name that gained a record
// meanwhile is left for the next pass.
absl::Status OrderUnrecorded(Registry& registry, KvStore& store, const std::string& prefix,
                             const std::string& self, const std::vector<VersionInfo>& fresh,
                             size_t max_txn_ops, ReconcileCounts& counts) {
  const size_t per_txn = std::max<size_t>(max_txn_ops / 2, 1);
  for (size_t start = 0; start < fresh.size(); start += per_txn) {
    const size_t end = std::min(fresh.size(), start + per_txn);
    std::vector<KvCompare> absent;
    std::vector<KvOp> puts;
    for (size_t i = start; i < end; ++i) {
      const VersionInfo& info = fresh[i];
      const std::string key = NameRecordKey(prefix, info.name);
      absent.push_back(KvCompare::Absent(key));
      puts.push_back(KvOp::Put(key, EncodeNameRecord(NameRecord{.name = info.name,
                                                                .writer = self,
                                                                .total_bytes = info.total_bytes,
                                                                .crc32c = info.crc32c,
                                                                .holders = {self}},
                                                     /*with_origin=*/false)));
    }
    TENSORD_ASSIGN_OR_RETURN(KvTxnResult written, store.Txn(absent, puts, {}));
    if (written.succeeded) {
      for (size_t i = start; i < end; ++i) {
        if (registry.SetOrigin(fresh[i].name, fresh[i].version, written.revision).ok()) {
          ++counts.ordered;
        }
      }
      continue;
    }
    // Some name gained a record meanwhile: one at a time, and a name that
    // has one now stays unordered here (its record decides its reads).
    for (size_t i = start; i < end; ++i) {
      TENSORD_ASSIGN_OR_RETURN(KvTxnResult one,
                               store.Txn({&absent[i - start], 1}, {&puts[i - start], 1}, {}));
      if (one.succeeded && registry.SetOrigin(fresh[i].name, fresh[i].version, one.revision).ok()) {
        ++counts.ordered;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReconcileCounts> ReconcileHeld(Registry& registry, KvStore& store,
                                              RecordReader& records, ClusterWrites& writes,
                                              LatestReads& latest, const std::string& prefix,
                                              const std::string& self, size_t max_txn_ops) {
  ReconcileCounts counts;
  std::string token;
  do {
    TENSORD_ASSIGN_OR_RETURN(ListPage page, registry.List("", kPage, token));
    token = page.next_page_token;
    std::vector<VersionInfo> judged;
    std::vector<std::string> names;
    for (VersionInfo& info : page.tensors) {
      // A cache copy nobody ordered promises nothing across nodes.
      if (info.origin == 0 && info.retention == Retention::kCache) continue;
      if (info.layout.device.device_type != kDLCPU && info.origin == 0) continue;
      names.push_back(info.name);
      judged.push_back(std::move(info));
    }
    counts.checked += judged.size();
    std::vector<RecordReader::Answer> answers = ReadRecords(records, std::move(names));
    std::vector<VersionInfo> unrecorded;
    for (size_t i = 0; i < judged.size(); ++i) {
      const VersionInfo& info = judged[i];
      if (answers[i].status().code() == absl::StatusCode::kDataLoss) {
        // A record tensord did not write: this name cannot be judged, the
        // others can. The copy stays; reads of the name fail on the record.
        Log(LogLevel::kWarning, "cluster_record_unreadable",
            {{"name", info.name}, {"error", answers[i].status().ToString()}});
        continue;
      }
      TENSORD_RETURN_IF_ERROR(answers[i].status());
      const std::optional<NameRecord>& record = *answers[i];
      if (info.origin != 0) {
        if (!record.has_value() || record->origin > info.origin) {
          if (latest.DropStaleCopy(info.name, record.has_value() ? record->origin : INT64_MAX)) {
            ++counts.dropped;
          }
          continue;
        }
        if (record->origin == info.origin && info.retention != Retention::kCache &&
            !Holds(*record, self)) {
          TENSORD_RETURN_IF_ERROR(writes.JoinHolders(info.name, info.origin));
          ++counts.joined;
        }
        continue;
      }
      // Held before this node was in the cluster's order.
      if (!record.has_value()) {
        unrecorded.push_back(info);
        continue;
      }
      if (record->total_bytes == info.total_bytes && record->crc32c == info.crc32c) {
        // The same bytes (every node preloading one file): one version.
        if (registry.SetOrigin(info.name, info.version, record->origin).ok()) {
          if (!Holds(*record, self)) {
            TENSORD_RETURN_IF_ERROR(writes.JoinHolders(info.name, record->origin));
            ++counts.joined;
          }
        }
        continue;
      }
      Log(LogLevel::kWarning, "cluster_held_version_dropped",
          {{"name", info.name},
           {"version", info.version},
           {"reason",
            "the cluster ordered other bytes for the name while this node was not in it"}});
      if (registry.Delete(info.name, info.version).ok()) ++counts.dropped;
    }
    TENSORD_RETURN_IF_ERROR(
        OrderUnrecorded(registry, store, prefix, self, unrecorded, max_txn_ops, counts));
  } while (!token.empty());
  return counts;
}

}  // namespace tensord
