// The batch section's scale rows, all in the same rounds as their raw TCP
// baselines:
//   - many distinct names: config.batch_distinct_names 4 KiB tensors put
//     and fetched (remote and local) in batches of 1024, so the server
//     looks up and replaces that many names, not the same 1024 again;
//   - mixed sizes: one batch whose items cycle through 16..256 KiB (KV
//     blocks), put and fetched (remote and local), against raw TCP of the
//     same bytes.
// Every item is checked (size and CRC-32C) outside the timed calls.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/baselines.h"
#include "bench/cases.h"
#include "service/common/crc32c.h"
#include "service/common/status_macros.h"

namespace tensord::bench {
namespace {

constexpr uint64_t kDistinctBytes = 4096;
constexpr size_t kCallItems = 1024;
constexpr double kMixedTarget = 0.7;  // issue 29: mixed sizes at >= 0.7x raw TCP remote

// Items cut from env.source, each with its shape (ByteTensor points at it)
// and CRC-32C.
struct SourceItems {
  std::vector<std::string> names;
  std::vector<uint64_t> offsets;
  std::vector<uint64_t> sizes;
  std::vector<int64_t> shapes;  // not resized once items point at it
  std::vector<uint32_t> crc32c;
  uint64_t total = 0;
};

// Whether each answer holds its item's bytes.
absl::Status CheckStored(const std::vector<absl::StatusOr<TensorInfo>>& stored,
                         const SourceItems& items, size_t first, absl::string_view what) {
  for (size_t i = 0; i < stored.size(); ++i) {
    const size_t item = first + i;
    if (!stored[i].ok()) {
      return absl::Status(
          stored[i].status().code(),
          absl::StrCat(what, " '", items.names[item], "': ", stored[i].status().message()));
    }
    if (stored[i]->total_bytes != items.sizes[item] || stored[i]->crc32c != items.crc32c[item]) {
      return absl::DataLossError(absl::StrCat(what, " stored '", items.names[item], "' as ",
                                              stored[i]->total_bytes, " bytes with CRC-32C ",
                                              stored[i]->crc32c));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFetched(const std::vector<absl::StatusOr<Tensor>>& fetched,
                          const SourceItems& items, size_t first, absl::string_view what) {
  for (size_t i = 0; i < fetched.size(); ++i) {
    const size_t item = first + i;
    if (!fetched[i].ok()) {
      return absl::Status(
          fetched[i].status().code(),
          absl::StrCat(what, " '", items.names[item], "': ", fetched[i].status().message()));
    }
    const uint64_t size = fetched[i]->data_bytes();
    if (size != items.sizes[item] ||
        Crc32c(fetched[i]->dl_tensor().data, size) != items.crc32c[item]) {
      return absl::DataLossError(
          absl::StrCat(what, " of '", items.names[item], "' got other bytes (", size, ")"));
    }
  }
  return absl::OkStatus();
}

SourceItems MakeItems(const BenchEnv& env, absl::string_view kind, size_t count,
                      const std::vector<uint64_t>& sizes, uint64_t wrap_bytes) {
  SourceItems items;
  items.shapes.reserve(count);
  uint64_t offset = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t size = sizes[i % sizes.size()];
    if (offset + size > wrap_bytes) offset = 0;  // the same source bytes again, another name
    items.names.push_back(absl::StrFormat("bench/batch-scale/%s/%06d", kind, i));
    items.offsets.push_back(offset);
    items.sizes.push_back(size);
    items.shapes.push_back(static_cast<int64_t>(size));
    items.crc32c.push_back(Crc32c(env.source.data() + offset, size));
    items.total += size;
    offset += size;
  }
  return items;
}

// The calls of one case: puts or fetches of every item, kCallItems a call;
// returns the seconds inside the calls.
absl::StatusOr<double> TimedPuts(const BenchEnv& env, Client& client, const SourceItems& items) {
  double seconds = 0;
  std::vector<BatchPutItem> call;
  for (size_t first = 0; first < items.names.size(); first += kCallItems) {
    const size_t end = std::min(items.names.size(), first + kCallItems);
    call.clear();
    for (size_t i = first; i < end; ++i) {
      call.push_back({.name = items.names[i],
                      .tensor = ByteTensor(env.source.data() + items.offsets[i], &items.shapes[i]),
                      .retention = Retention::kCache});
    }
    const Clock::time_point start = Clock::now();
    TENSORD_ASSIGN_OR_RETURN(BatchPutResult result, client.BatchPut(call));
    seconds += SecondsSince(start);
    TENSORD_RETURN_IF_ERROR(CheckStored(result.items, items, first, "BatchPut"));
  }
  return seconds;
}

absl::StatusOr<double> TimedFetches(Client& client, const SourceItems& items) {
  double seconds = 0;
  std::vector<TensorRef> call;
  for (size_t first = 0; first < items.names.size(); first += kCallItems) {
    const size_t end = std::min(items.names.size(), first + kCallItems);
    call.clear();
    for (size_t i = first; i < end; ++i) call.push_back({.name = items.names[i]});
    const Clock::time_point start = Clock::now();
    TENSORD_ASSIGN_OR_RETURN(std::vector<absl::StatusOr<Tensor>> fetched, client.BatchFetch(call));
    seconds += SecondsSince(start);
    TENSORD_RETURN_IF_ERROR(CheckFetched(fetched, items, first, "BatchFetch"));
  }
  return seconds;
}

}  // namespace

absl::Status RunBatchScaleRows(const BenchEnv& env, Client& remote, Client& local,
                               RawTcpLink& link) {
  const BenchConfig& config = env.config;
  if (config.batch_distinct_names == 0 || config.batch_mixed_count == 0) return absl::OkStatus();
  const SourceItems distinct =
      MakeItems(env, "distinct", static_cast<size_t>(config.batch_distinct_names), {kDistinctBytes},
                kDistinctBytes * kCallItems);
  const SourceItems mixed = MakeItems(env, "mixed", static_cast<size_t>(config.batch_mixed_count),
                                      config.batch_mixed_sizes, config.BatchMixedBytes());
  const uint64_t call_bytes = kDistinctBytes * std::min(kCallItems, distinct.names.size());

  enum Case {
    kRawCall,
    kDistinctPut,
    kDistinctFetch,
    kDistinctLocalFetch,
    kDistinctLocalPut,
    kRawMixed,
    kMixedPut,
    kMixedFetch,
    kMixedLocalFetch,
    kMixedLocalPut
  };
  const std::vector<TimedRun> cases = {[&] { return TimedRawTransfer(env, link, call_bytes); },
                                       [&] { return TimedPuts(env, remote, distinct); },
                                       [&] { return TimedFetches(remote, distinct); },
                                       [&] { return TimedFetches(local, distinct); },
                                       [&] { return TimedPuts(env, local, distinct); },
                                       [&] { return TimedRawTransfer(env, link, mixed.total); },
                                       [&] { return TimedPuts(env, remote, mixed); },
                                       [&] { return TimedFetches(remote, mixed); },
                                       [&] { return TimedFetches(local, mixed); },
                                       [&] { return TimedPuts(env, local, mixed); }};
  TENSORD_ASSIGN_OR_RETURN(std::vector<std::vector<double>> samples,
                           RepeatInterleaved(config.batch_scale_policy, cases));
  const std::string runs = absl::StrCat("median of ", samples[kRawCall].size());

  const double raw_call_gbps = GigabytesPerSecond(call_bytes, Median(samples[kRawCall]));
  const std::string names = absl::StrCat(distinct.names.size());
  for (auto [which, label] :
       {std::pair{kDistinctPut, "put, BatchPut"}, std::pair{kDistinctFetch, "fetch, BatchFetch"},
        std::pair{kDistinctLocalFetch, "local fetch, BatchFetch"},
        std::pair{kDistinctLocalPut, "local put, BatchPut"}}) {
    const double seconds = Median(samples[which]);
    env.report.Add(
        {.section = kBatchSection,
         .name = absl::StrCat(label, " of ", names, " distinct names"),
         .bytes = kDistinctBytes,
         .value = static_cast<double>(distinct.names.size()) / seconds,
         .unit = "tensors/s",
         .ratio = GigabytesPerSecond(distinct.total, seconds) / raw_call_gbps,
         .baseline = "raw TCP, same bytes",
         .note = absl::StrCat(runs, "; ", kCallItems, " a call, ", names,
                              " names each put or fetched once per sample (cache retention)")});
  }
  const double raw_mixed_gbps = GigabytesPerSecond(mixed.total, Median(samples[kRawMixed]));
  const std::string mixed_label =
      absl::StrCat(mixed.names.size(), " mixed ", FormatBytes(config.batch_mixed_sizes.front()),
                   "-", FormatBytes(config.batch_mixed_sizes.back()));
  for (auto [which, label, remote_row] :
       {std::tuple{kMixedPut, "put, BatchPut", true},
        std::tuple{kMixedFetch, "fetch, BatchFetch", true},
        std::tuple{kMixedLocalFetch, "local fetch, BatchFetch", false},
        std::tuple{kMixedLocalPut, "local put, BatchPut", false}}) {
    const double gbps = GigabytesPerSecond(mixed.total, Median(samples[which]));
    env.report.Add(
        {.section = kBatchSection,
         .name = absl::StrCat(label, " of ", mixed_label),
         .bytes = mixed.total,
         .value = gbps,
         .unit = "GB/s",
         .ratio = gbps / raw_mixed_gbps,
         .baseline = "raw TCP, same bytes",
         .target = remote_row ? std::optional(Target::RatioAtLeast(kMixedTarget)) : std::nullopt,
         .note = absl::StrCat(runs, "; KV-block sizes, one call; items over 64 KiB ",
                              "travel as a header and chunks")});
  }
  return absl::OkStatus();
}

}  // namespace tensord::bench
