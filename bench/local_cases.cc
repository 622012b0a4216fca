// Local handoff latency by size: cold (a lease and the memfd over the handoff
// socket, then mmap) and cached (a version this process already holds), and,
// apart from the fetch, what a consumer pays to touch the mapped pages.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/baselines.h"
#include "bench/cases.h"
#include "service/common/status_macros.h"

namespace tensord::bench {
namespace {

double Micros(double seconds) { return seconds * 1e6; }

std::string Spread(const std::vector<double>& samples) {
  return absl::StrFormat("median of %d, p99 %.1f us", samples.size(),
                         Micros(Percentile(samples, 99)));
}

// One local fetch timed up to the returned tensor; the check (which touches
// a few pages) and the release are not timed.
absl::StatusOr<double> TimedLocalFetch(Client& client, const std::string& name, uint64_t version,
                                       uint64_t bytes, bool read_only = false) {
  FetchOptions options;
  options.version = version;
  options.read_only = read_only;
  const Clock::time_point start = Clock::now();
  TENSORD_ASSIGN_OR_RETURN(Tensor tensor, client.Fetch(name, options));
  const double seconds = SecondsSince(start);
  TENSORD_RETURN_IF_ERROR(CheckFetched(tensor, bytes, absl::StrCat("local fetch of ", name)));
  return seconds;
}

}  // namespace

absl::Status RunLocalSection(const BenchEnv& env) {
  const BenchConfig& config = env.config;
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> client,
                           ConnectClient(env, TransferPath::kLocal));
  if (!client->local()) {
    return absl::UnavailableError(
        "local handoff is not reachable although the benchmark's "
        "tensord has a handoff socket");
  }
  const std::vector<uint64_t>& sizes = config.local_sizes;
  std::vector<TensorInfo> stored;
  for (uint64_t bytes : sizes) {
    TENSORD_ASSIGN_OR_RETURN(TensorInfo info, PutSource(env, *client, "local", bytes));
    stored.push_back(std::move(info));
  }

  // Cold: no Tensor of the version alive, so the client asks the server for
  // a lease and the memfd. All sizes in turn, since they are compared.
  std::vector<TimedRun> cold_cases;
  for (size_t i = 0; i < sizes.size(); ++i) {
    cold_cases.push_back(
        [&, i] { return TimedLocalFetch(*client, stored[i].name, stored[i].version, sizes[i]); });
  }
  TENSORD_ASSIGN_OR_RETURN(std::vector<std::vector<double>> cold,
                           RepeatInterleaved(config.latency_policy, cold_cases));
  const double first_cold_us = Micros(Median(cold.front()));

  for (size_t i = 0; i < sizes.size(); ++i) {
    const uint64_t bytes = sizes[i];
    const std::string& name = stored[i].name;
    const uint64_t version = stored[i].version;
    Row cold_row{.section = kLocalSection,
                 .name = "cold fetch (lease + memfd + mmap)",
                 .bytes = bytes,
                 .value = Micros(Median(cold[i])),
                 .unit = "us",
                 .note = absl::StrCat(Spread(cold[i]), "; explicit version not held")};
    if (i > 0) {
      cold_row.ratio = cold_row.value / first_cold_us;
      cold_row.baseline = absl::StrCat("cold fetch of ", FormatBytes(sizes.front()));
      if (i + 1 == sizes.size()) cold_row.target = Target::RatioAtMost(2.0);
    }
    env.report.Add(std::move(cold_row));

    // Cached: an earlier Tensor of the version is alive.
    FetchOptions at_version;
    at_version.version = version;
    TENSORD_ASSIGN_OR_RETURN(Tensor keeper, client->Fetch(name, at_version));
    TENSORD_ASSIGN_OR_RETURN(
        std::vector<std::vector<double>> cached,
        RepeatInterleaved(config.latency_policy,
                          {[&] { return TimedLocalFetch(*client, name, version, bytes); },
                           [&] { return TimedLocalFetch(*client, name, 0, bytes); },
                           [&] { return TimedLocalFetch(*client, name, version, bytes, true); }}));
    env.report.Add(
        {.section = kLocalSection,
         .name = "cached fetch (explicit version held)",
         .bytes = bytes,
         .value = Micros(Median(cached[0])),
         .unit = "us",
         .target = Target::ValueAtMost(10),
         .note = absl::StrCat(Spread(cached[0]), "; no round trip: a new private mmap")});
    env.report.Add({.section = kLocalSection,
                    .name = "cached fetch (latest version)",
                    .bytes = bytes,
                    .value = Micros(Median(cached[1])),
                    .unit = "us",
                    .note = absl::StrCat(Spread(cached[1]),
                                         "; one socket round trip names the "
                                         "latest version, then a new mmap")});
    env.report.Add({.section = kLocalSection,
                    .name = "cached fetch (version held, read_only)",
                    .bytes = bytes,
                    .value = Micros(Median(cached[2])),
                    .unit = "us",
                    .target = Target::ValueAtMost(10),
                    .note = absl::StrCat(Spread(cached[2]),
                                         "; FetchOptions.read_only: the "
                                         "version's one shared mapping, no mmap")});

    // The consumer's first read of every page of a fresh mapping, against a
    // memcpy of the same bytes between pre-faulted buffers.
    TENSORD_ASSIGN_OR_RETURN(
        std::vector<std::vector<double>> touch_and_copy,
        RepeatInterleaved(
            config.first_touch_policy,
            {[&]() -> absl::StatusOr<double> {
               TENSORD_ASSIGN_OR_RETURN(Tensor tensor, client->Fetch(name, at_version));
               const Clock::time_point start = Clock::now();
               const uint64_t sum = TouchEveryPage(tensor.dl_tensor().data, bytes);
               const double seconds = SecondsSince(start);
               asm volatile("" : : "r"(sum));
               TENSORD_RETURN_IF_ERROR(CheckFetched(tensor, bytes, "local first touch"));
               return seconds;
             },
             [&]() -> absl::StatusOr<double> {
               return TimeMemcpy(env.source, env.destination, bytes);
             }}));
    const std::vector<double>& touch = touch_and_copy[0];
    const std::vector<double>& copy = touch_and_copy[1];
    const double copy_us = Micros(Median(copy));
    env.report.Add({.section = kLocalSection,
                    .name = "consumer first touch (read each page)",
                    .bytes = bytes,
                    .value = Micros(Median(touch)),
                    .unit = "us",
                    .ratio = Micros(Median(touch)) / copy_us,
                    .baseline = "memcpy of the same bytes",
                    .note = absl::StrCat(Spread(touch), "; paid by the consumer, not the fetch")});
    env.report.Add({.section = kLocalSection,
                    .name = "memcpy of the same bytes (pre-faulted)",
                    .bytes = bytes,
                    .value = copy_us,
                    .unit = "us",
                    .note = Spread(copy)});
  }
  for (const TensorInfo& info : stored) {
    TENSORD_RETURN_IF_ERROR(client->Delete(info.name).status());
  }
  return absl::OkStatus();
}

}  // namespace tensord::bench
