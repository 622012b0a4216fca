// The server's resident memory while one client fetches a large tensor:
// a copy of the tensor's bytes anywhere in the server would show as anonymous
// memory, while the stored tensor itself is memfd (shmem) pages.
#include "absl/strings/str_cat.h"
#include "bench/cases.h"
#include "bench/rss_sampler.h"
#include "service/common/status_macros.h"

namespace tensord::bench {
namespace {

// Mebibytes of a byte count or of a difference of two.
double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }
double MiB(uint64_t bytes) { return MiB(static_cast<int64_t>(bytes)); }

}  // namespace

absl::Status RunMemorySection(const BenchEnv& env) {
  const uint64_t bytes = env.config.memory_probe_bytes;
  TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<Client> client,
                           ConnectClient(env, TransferPath::kRemote));
  TENSORD_ASSIGN_OR_RETURN(ResidentMemory before_put, ReadResidentMemory(env.tensord_pid));
  TENSORD_RETURN_IF_ERROR(EnsureRemoteTensor(env, *client, bytes));
  const std::string name = TensorName("remote", bytes);
  TENSORD_RETURN_IF_ERROR(client->Stat(name).status());  // the channel is up

  TENSORD_ASSIGN_OR_RETURN(ResidentMemory before, ReadResidentMemory(env.tensord_pid));
  int samples = 0;
  absl::StatusOr<ResidentMemory> peak;
  {
    RssSampler sampler(env.tensord_pid, /*interval_us=*/1000);
    absl::StatusOr<Tensor> fetched = client->Fetch(name);
    peak = sampler.Stop(&samples);
    TENSORD_RETURN_IF_ERROR(fetched.status());
    TENSORD_RETURN_IF_ERROR(CheckFetched(*fetched, bytes, "remote fetch (memory probe)"));
  }
  TENSORD_RETURN_IF_ERROR(peak.status());

  const std::string sampled = absl::StrCat(samples, " samples of /proc/PID/status, 1 ms apart");
  Report& report = env.report;
  report.Add({.section = kMemorySection,
              .name = "VmRSS before the fetch",
              .bytes = bytes,
              .value = MiB(before.vm_rss),
              .unit = "MiB",
              .note = absl::StrCat("RssAnon ", static_cast<int>(MiB(before.rss_anon)),
                                   " MiB, RssShmem ", static_cast<int>(MiB(before.rss_shmem)),
                                   " MiB (the stored tensor's memfd pages mapped so far)")});
  report.Add({.section = kMemorySection,
              .name = "RssAnon left resident by the put",
              .bytes = bytes,
              .value = MiB(static_cast<int64_t>(before.rss_anon) -
                           static_cast<int64_t>(before_put.rss_anon)),
              .unit = "MiB",
              .note = "the remote put that stored the tensor, measured after it returned (heap "
                      "the allocator kept); part of the strict figure below"});
  report.Add(
      {.section = kMemorySection,
       .name = "RssAnon peak growth during fetch",
       .bytes = bytes,
       .value = MiB(static_cast<int64_t>(peak->rss_anon) - static_cast<int64_t>(before.rss_anon)),
       .unit = "MiB",
       .target = Target::ValueAtMost(64),
       .note = "primary figure: a copy of tensor bytes (heap, gRPC buffers) is anonymous "
               "memory; the stored tensor is shmem"});
  report.Add(
      {.section = kMemorySection,
       .name = "VmRSS peak growth during fetch",
       .bytes = bytes,
       .value = MiB(static_cast<int64_t>(peak->vm_rss) - static_cast<int64_t>(before.vm_rss)),
       .unit = "MiB",
       .note = "includes the tensor's shmem pages the server maps in while sending"});
  report.Add({.section = kMemorySection,
              .name = "VmRSS peak minus the tensor",
              .bytes = bytes,
              .value = MiB(static_cast<int64_t>(peak->vm_rss) - static_cast<int64_t>(bytes)),
              .unit = "MiB",
              .target = Target::ValueAtMost(64),
              .note = absl::StrCat("strict reading: everything resident beyond the tensor, "
                                   "binary and libraries included; RssShmem peak ",
                                   static_cast<int>(MiB(peak->rss_shmem)), " MiB; ", sampled)});

  bool reused = false;
  for (uint64_t size : env.config.transfer_sizes) reused |= size == bytes;
  if (!reused) TENSORD_RETURN_IF_ERROR(client->Delete(name).status());
  return absl::OkStatus();
}

}  // namespace tensord::bench
