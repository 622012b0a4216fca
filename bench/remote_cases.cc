// Remote fetch and put throughput against a raw TCP stream of the same bytes,
// and the memcpy baseline.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/baselines.h"
#include "bench/cases.h"
#include "service/common/crc32c.h"
#include "service/common/status_macros.h"

namespace tensord::bench {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr char kRawTcp[] = "raw TCP, same bytes";

std::string Runs(const std::vector<double>& samples) {
  return absl::StrCat("median of ", samples.size());
}

// A fetch timed from `start` to the returned tensor; the check and the
// tensor's release are not timed.
absl::StatusOr<double> TimedFetch(Client& client, const std::string& name, uint64_t bytes,
                                  Clock::time_point start = Clock::now()) {
  TENSORD_ASSIGN_OR_RETURN(Tensor tensor, client.Fetch(name));
  const double seconds = SecondsSince(start);
  TENSORD_RETURN_IF_ERROR(CheckFetched(tensor, bytes, absl::StrCat("remote fetch of ", name)));
  return seconds;
}

void AddThroughputRow(const BenchEnv& env, const std::string& name, uint64_t bytes,
                      const std::vector<double>& samples, double raw_gbps,
                      std::optional<Target> target, std::string note) {
  const double gbps = GigabytesPerSecond(bytes, Median(samples));
  env.report.Add({.section = kRemoteSection,
                  .name = name,
                  .bytes = bytes,
                  .value = gbps,
                  .unit = "GB/s",
                  .ratio = gbps / raw_gbps,
                  .baseline = kRawTcp,
                  .target = target,
                  .note = note.empty() ? Runs(samples) : absl::StrCat(Runs(samples), "; ", note)});
}

}  // namespace

absl::Status RunRemoteSection(const BenchEnv& env) {
  Report& report = env.report;
  {
    const uint64_t bytes = env.config.memcpy_bytes;
    TENSORD_ASSIGN_OR_RETURN(std::vector<double> samples,
                             Repeat(env.config.first_touch_policy, [&]() -> absl::StatusOr<double> {
                               return TimeMemcpy(env.source, env.destination, bytes);
                             }));
    report.Add({.section = kBaselineSection,
                .name = "memcpy, 1 thread, pre-faulted",
                .bytes = bytes,
                .value = GigabytesPerSecond(bytes, Median(samples)),
                .unit = "GB/s",
                .note = Runs(samples)});
  }

  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<RawTcpLink> link,
                           RawTcpLink::Open(env.source, env.destination));
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> client,
                           ConnectClient(env, TransferPath::kRemote));
  // Fetch with the receive pool off: every sample receives into new memory.
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> unpooled_client,
                           ConnectClient(env, TransferPath::kRemote, /*receive_pool_bytes=*/0));
  for (uint64_t bytes : env.config.transfer_sizes) {
    const std::string name = TensorName("remote", bytes);
    const std::string put_name = TensorName("put", bytes);
    const int64_t shape = static_cast<int64_t>(bytes);
    const bool large = bytes >= 256 * kMiB;
    const bool fresh = bytes == env.config.fresh_channel_bytes;
    TENSORD_RETURN_IF_ERROR(EnsureRemoteTensor(env, *client, bytes));

    // A put of a new version in `streams` (0: the client's choice).
    auto timed_put = [&](uint32_t streams) -> absl::StatusOr<double> {
      PutOptions options;
      options.streams = streams;
      const Clock::time_point start = Clock::now();
      TENSORD_ASSIGN_OR_RETURN(
          TensorInfo info, client->Put(put_name, ByteTensor(env.source.data(), &shape), options));
      const double seconds = SecondsSince(start);
      if (info.total_bytes != bytes) {
        return absl::DataLossError(
            absl::StrCat("put of ", bytes, " bytes stored ", info.total_bytes));
      }
      return seconds;
    };
    // Cases in the order they run in each round; the baseline is one of them.
    enum Case { kRaw, kFetch, kFetchInto, kPut, kFreshFetch, kFreshFetchInto };
    std::vector<TimedRun> cases = {[&] { return TimedRawTransfer(env, *link, bytes); },
                                   [&] { return TimedFetch(*client, name, bytes); },
                                   [&] {
                                     ScribbleSpots(env.destination.data(), bytes, kPatternSeed);
                                     return TimedFetchInto(env, *client, name, bytes);
                                   },
                                   [&] { return timed_put(0); }};
    if (fresh) {
      // A new Client (channel, TCP connection, HTTP/2 handshake) per fetch,
      // as tensorctl get pays; closing it is not timed.
      for (bool into : {false, true}) {
        cases.push_back([&, into]() -> absl::StatusOr<double> {
          if (into) ScribbleSpots(env.destination.data(), bytes, kPatternSeed);
          const Clock::time_point start = Clock::now();
          TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> fresh_client,
                                   ConnectClient(env, TransferPath::kRemote));
          return into ? TimedFetchInto(env, *fresh_client, name, bytes, start)
                      : TimedFetch(*fresh_client, name, bytes, start);
        });
      }
    }
    // The same FetchInto in 1, 2 and 4 concurrent streams (large sizes).
    constexpr uint32_t kStreamCounts[] = {1, 2, 4};
    const size_t first_streams_case = cases.size();
    if (large) {
      for (uint32_t streams : kStreamCounts) {
        cases.push_back([&, streams] {
          ScribbleSpots(env.destination.data(), bytes, kPatternSeed);
          FetchOptions options;
          options.streams = streams;
          return TimedFetchInto(env, *client, name, bytes, Clock::now(), options);
        });
      }
    }
    // The same put in 1, 2 and 4 concurrent streams (large sizes).
    const size_t first_put_streams_case = cases.size();
    if (large) {
      for (uint32_t streams : kStreamCounts) {
        cases.push_back([&, streams] { return timed_put(streams); });
      }
    }
    // What memory new to the process costs to write once: an unpooled
    // Fetch's new buffer and a put's new memfd pay it, the raw TCP receiver
    // does not. Up to 256 MiB: a GiB of new memory costs seconds a sample on
    // the dev VMs, which the 3-minute budget cannot afford.
    const bool time_first_touch = bytes <= 256 * kMiB;
    const size_t fresh_memory_case = cases.size();
    const size_t unpooled_fetch_case = fresh_memory_case + 1;
    if (time_first_touch) {
      cases.push_back([&]() -> absl::StatusOr<double> { return TimeFirstTouch(bytes); });
      cases.push_back([&] { return TimedFetch(*unpooled_client, name, bytes); });
    }
    TENSORD_ASSIGN_OR_RETURN(std::vector<std::vector<double>> samples,
                             RepeatInterleaved(env.config.transfer_policy(bytes), cases));

    const double raw_gbps = GigabytesPerSecond(bytes, Median(samples[kRaw]));
    report.Add({.section = kBaselineSection,
                .name = "raw TCP 127.0.0.1, 1 MiB send/recv",
                .bytes = bytes,
                .value = raw_gbps,
                .unit = "GB/s",
                .note = absl::StrCat(Runs(samples[kRaw]),
                                     "; 8-byte request, then the bytes; "
                                     "receiver buffer pre-faulted and reused")});
    if (time_first_touch) {
      report.Add({.section = kBaselineSection,
                  .name = "first write of new memory (mmap)",
                  .bytes = bytes,
                  .value = GigabytesPerSecond(bytes, Median(samples[fresh_memory_case])),
                  .unit = "GB/s",
                  .note = absl::StrCat(Runs(samples[fresh_memory_case]),
                                       "; one write per 4 KiB page of a new THP-advised mapping")});
    }
    AddThroughputRow(env, "fetch, warm channel (Fetch)", bytes, samples[kFetch], raw_gbps,
                     large ? std::optional(Target::RatioAtLeast(0.9)) : std::nullopt,
                     "a new tensor each time, received into the buffer the last one released "
                     "(receive pool)");
    if (time_first_touch) {
      const double first_touch_s = Median(samples[fresh_memory_case]);
      const double unpooled_s = Median(samples[unpooled_fetch_case]);
      AddThroughputRow(
          env, "fetch, warm, new memory (Fetch)", bytes, samples[unpooled_fetch_case], raw_gbps,
          std::nullopt,
          absl::StrCat("receive pool off: into new memory each time; ",
                       absl::StrFormat("%.1f ms over FetchInto, first touch %.1f ms",
                                       (unpooled_s - Median(samples[kFetchInto])) * 1e3,
                                       first_touch_s * 1e3)));
    }
    AddThroughputRow(env, "fetch, warm channel (FetchInto)", bytes, samples[kFetchInto], raw_gbps,
                     large ? std::optional(Target::RatioAtLeast(0.9)) : std::nullopt,
                     "into a pre-faulted, reused buffer, like the raw TCP receiver");
    if (large) {
      for (size_t i = 0; i < std::size(kStreamCounts); ++i) {
        AddThroughputRow(env,
                         absl::StrCat("fetch, warm (FetchInto, ", kStreamCounts[i],
                                      kStreamCounts[i] == 1 ? " stream)" : " streams)"),
                         bytes, samples[first_streams_case + i], raw_gbps, std::nullopt,
                         "FetchOptions::streams; each stream its own TCP connection");
      }
    }
    if (fresh) {
      AddThroughputRow(env, "fetch, fresh channel (Fetch)", bytes, samples[kFreshFetch], raw_gbps,
                       Target::RatioAtLeast(0.85), "connect + fetch, new Client each time");
      AddThroughputRow(env, "fetch, fresh channel (FetchInto)", bytes, samples[kFreshFetchInto],
                       raw_gbps, Target::RatioAtLeast(0.85),
                       "connect + fetch, new Client each time");
    }
    AddThroughputRow(env, "put, warm channel", bytes, samples[kPut], raw_gbps,
                     bytes == 256 * kMiB ? std::optional(Target::RatioAtLeast(0.75)) : std::nullopt,
                     "new version each time (server copies + CRC-32C; above 1 MiB into the spare "
                     "memfd of a gone version)");
    if (large) {
      for (size_t i = 0; i < std::size(kStreamCounts); ++i) {
        AddThroughputRow(env,
                         absl::StrCat("put, warm (", kStreamCounts[i],
                                      kStreamCounts[i] == 1 ? " stream)" : " streams)"),
                         bytes, samples[first_put_streams_case + i], raw_gbps, std::nullopt,
                         "PutOptions::streams; each stream its own TCP connection, the server "
                         "writes each part at its offset");
      }
    }

    if (fresh) {
      // The same FetchInto on a new channel, then on that channel after a
      // series of puts and fetches: a warm channel must not be slower.
      std::vector<double> before;
      std::vector<double> after;
      for (int round = 0; round < env.config.warm_channel_rounds; ++round) {
        TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> channel,
                                 ConnectClient(env, TransferPath::kRemote));
        TENSORD_RETURN_IF_ERROR(channel->Stat(name).status());  // connected, not timed
        ScribbleSpots(env.destination.data(), bytes, kPatternSeed);
        TENSORD_ASSIGN_OR_RETURN(double first, TimedFetchInto(env, *channel, name, bytes));
        before.push_back(first);
        for (int i = 0; i < 4; ++i) {
          TENSORD_RETURN_IF_ERROR(
              channel->Put(put_name, ByteTensor(env.source.data(), &shape)).status());
          TENSORD_RETURN_IF_ERROR(channel->Fetch(name).status());
        }
        ScribbleSpots(env.destination.data(), bytes, kPatternSeed);
        TENSORD_ASSIGN_OR_RETURN(double later, TimedFetchInto(env, *channel, name, bytes));
        after.push_back(later);
      }
      AddThroughputRow(env, "fetch, new channel (FetchInto)", bytes, before, raw_gbps, std::nullopt,
                       "a new Client's first fetch (connected before timing)");
      AddThroughputRow(
          env, "fetch, same channel after 8 calls", bytes, after, raw_gbps,
          Target::RatioAtLeast(0.9),
          absl::StrCat("after 4 puts and 4 fetches of the same size; ",
                       absl::StrFormat("%.2fx the new channel's", Median(before) / Median(after))));
    }

    // The server's checksum of what the last put stored must match the source's.
    TENSORD_ASSIGN_OR_RETURN(TensorInfo put_info, client->Stat(put_name));
    const uint32_t crc = Crc32c(env.source.data(), bytes);
    if (put_info.total_bytes != bytes || put_info.crc32c != crc) {
      return absl::DataLossError(absl::StrCat("put of ", bytes, " bytes stored ",
                                              put_info.total_bytes, " bytes with crc32c ",
                                              put_info.crc32c, ", expected ", crc));
    }
    TENSORD_RETURN_IF_ERROR(client->Delete(put_name).status());
    TENSORD_RETURN_IF_ERROR(client->Delete(name).status());
  }
  return absl::OkStatus();
}

}  // namespace tensord::bench
