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
                                       uint64_t bytes) {
  FetchOptions options;
  options.version = version;
  const Clock::time_point start = Clock::now();
  TENSORD_ASSIGN_OR_RETURN(Tensor tensor, client.Fetch(name, options));
  const double seconds = SecondsSince(start);
  TENSORD_RETURN_IF_ERROR(CheckFetched(tensor, bytes, absl::StrCat("local fetch of ", name)));
  return seconds;
}

}  // namespace

absl::Status RunLocalSection(const BenchEnv& env) {
  const BenchConfig& config = env.config;
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> client, ConnectClient(env, TransferPath::kLocal));
  if (!client->local()) {
    return absl::UnavailableError("local handoff is not reachable although the benchmark's "
                                  "tensord has a handoff socket");
  }
  std::optional<double> first_cold;
  uint64_t first_bytes = 0;
  for (uint64_t bytes : config.local_sizes) {
    const bool largest = bytes == config.local_sizes.back();
    TENSORD_ASSIGN_OR_RETURN(TensorInfo stored, PutSource(env, *client, "local", bytes));
    const std::string name = stored.name;
    const uint64_t version = stored.version;

    // Cold: no Tensor of this version alive, so the client asks the server.
    TENSORD_ASSIGN_OR_RETURN(std::vector<double> cold, Repeat(config.latency_policy, [&] {
                               return TimedLocalFetch(*client, name, version, bytes);
                             }));
    const double cold_us = Micros(Median(cold));
    if (!first_cold.has_value()) {
      first_cold = cold_us;
      first_bytes = bytes;
    }
    Row cold_row{.section = kLocalSection,
                 .name = "cold fetch (lease + memfd + mmap)",
                 .bytes = bytes,
                 .value = cold_us,
                 .unit = "us",
                 .note = absl::StrCat(Spread(cold), "; explicit version not held")};
    if (bytes != first_bytes) {
      cold_row.ratio = cold_us / *first_cold;
      cold_row.baseline = absl::StrCat("cold fetch of ", FormatBytes(first_bytes));
      if (largest) cold_row.target = Target::RatioAtMost(2.0);
    }
    env.report.Add(std::move(cold_row));

    // Cached: an earlier Tensor of the version is alive.
    FetchOptions at_version;
    at_version.version = version;
    TENSORD_ASSIGN_OR_RETURN(Tensor keeper, client->Fetch(name, at_version));
    TENSORD_ASSIGN_OR_RETURN(std::vector<double> cached, Repeat(config.latency_policy, [&] {
                               return TimedLocalFetch(*client, name, version, bytes);
                             }));
    env.report.Add({.section = kLocalSection,
                    .name = "cached fetch (explicit version held)",
                    .bytes = bytes,
                    .value = Micros(Median(cached)),
                    .unit = "us",
                    .target = Target::ValueAtMost(10),
                    .note = absl::StrCat(Spread(cached), "; no round trip: a new private mmap")});
    TENSORD_ASSIGN_OR_RETURN(std::vector<double> latest, Repeat(config.latency_policy, [&] {
                               return TimedLocalFetch(*client, name, 0, bytes);
                             }));
    env.report.Add({.section = kLocalSection,
                    .name = "cached fetch (latest version)",
                    .bytes = bytes,
                    .value = Micros(Median(latest)),
                    .unit = "us",
                    .note = absl::StrCat(Spread(latest), "; one socket round trip names the "
                                                         "latest version, then a new mmap")});

    // The consumer's first read of every page of a fresh mapping, against a
    // memcpy of the same bytes between pre-faulted buffers.
    TENSORD_ASSIGN_OR_RETURN(
        std::vector<double> touch,
        Repeat(config.first_touch_policy, [&]() -> absl::StatusOr<double> {
          TENSORD_ASSIGN_OR_RETURN(Tensor tensor, client->Fetch(name, at_version));
          const Clock::time_point start = Clock::now();
          const uint64_t sum = TouchEveryPage(tensor.dl_tensor().data, bytes);
          const double seconds = SecondsSince(start);
          asm volatile("" : : "r"(sum));
          TENSORD_RETURN_IF_ERROR(CheckFetched(tensor, bytes, "local first touch"));
          return seconds;
        }));
    TENSORD_ASSIGN_OR_RETURN(
        std::vector<double> copy,
        Repeat(config.first_touch_policy, [&]() -> absl::StatusOr<double> {
          return TimeMemcpy(env.source, env.destination, bytes);
        }));
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

    keeper = Tensor();
    TENSORD_RETURN_IF_ERROR(client->Delete(name).status());
  }
  return absl::OkStatus();
}

}  // namespace tensord::bench
