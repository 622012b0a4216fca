// The batch section's floor rows: what the server's registry costs a small
// tensor with no transport at all. The registry of this process (not the
// benchmark's tensord) takes 1024 x 4 KiB puts as a put_many's items reach
// it: Prepare (reservation and arena slot), a memcpy into the slot, Publish
// (checks, seal, CRC-32C, install). Against it, in the same rounds, only
// the bytes' own work: a memcpy and a CRC-32C of each. A batch put over any
// transport costs at least the first; a million tensors a second is 1 us.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/cases.h"
#include "service/common/crc32c.h"
#include "service/common/status_macros.h"
#include "service/registry/registry.h"

namespace tensord::bench {
namespace {

constexpr int kItems = 1024;
constexpr uint64_t kItemBytes = 4096;

dlpack::TensorLayout ItemLayout() {
  dlpack::TensorLayout layout;
  layout.dtype = DLDataType{kDLUInt, 8, 1};
  layout.shape = {static_cast<int64_t>(kItemBytes)};
  layout.device = DLDevice{kDLCPU, 0};
  return layout;
}

}  // namespace

absl::Status RunRegistryFloorRows(const BenchEnv& env) {
  RegistryOptions options;
  options.max_host_bytes = uint64_t{1} << 30;
  Registry registry(options);
  TENSORD_ASSIGN_OR_RETURN(const Buffer source, Buffer::Allocate(kItems * kItemBytes));
  TENSORD_ASSIGN_OR_RETURN(const Buffer target, Buffer::Allocate(kItems * kItemBytes));
  FillPattern(source.data(), source.size(), kPatternSeed);
  std::vector<std::string> names;
  for (int i = 0; i < kItems; ++i) names.push_back(absl::StrFormat("bench/floor/%04d", i));

  // Written, so the compiler cannot drop the CRCs.
  volatile uint32_t sum = 0;
  const std::vector<TimedRun> cases = {
      [&]() -> absl::StatusOr<double> {
        const Clock::time_point start = Clock::now();
        for (int i = 0; i < kItems; ++i) {
          const uint64_t at = static_cast<uint64_t>(i) * kItemBytes;
          std::memcpy(target.data() + at, source.data() + at, kItemBytes);
          sum = Crc32c(target.data() + at, kItemBytes);
        }
        return SecondsSince(start);
      },
      [&]() -> absl::StatusOr<double> {
        const Clock::time_point start = Clock::now();
        for (int i = 0; i < kItems; ++i) {
          TENSORD_ASSIGN_OR_RETURN(PendingVersion pending,
                                   registry.Prepare(names[i], ItemLayout(), kItemBytes));
          TENSORD_RETURN_IF_ERROR(pending.buffer->Write(
              0, source.data() + static_cast<uint64_t>(i) * kItemBytes, kItemBytes));
          TENSORD_RETURN_IF_ERROR(registry.Publish(std::move(pending)).status());
        }
        return SecondsSince(start);
      }};
  TENSORD_ASSIGN_OR_RETURN(std::vector<std::vector<double>> samples,
                           RepeatInterleaved(env.config.batch_policy(kItems), cases));
  const double bytes_us = Median(samples[0]) * 1e6 / kItems;
  const double registry_us = Median(samples[1]) * 1e6 / kItems;
  env.report.Add({.section = kBatchSection,
                  .name = absl::StrCat("registry publish in process, ", kItems, " items"),
                  .bytes = kItemBytes,
                  .value = registry_us,
                  .unit = "us",
                  .ratio = registry_us / bytes_us,
                  .baseline = absl::StrFormat("memcpy + CRC-32C of each item (%.2f us)", bytes_us),
                  .note = absl::StrCat("median of ", samples[1].size(),
                                       "; Prepare, memcpy, Publish an item, no transport: the "
                                       "server's least cost a put tensor")});
  return absl::OkStatus();
}

}  // namespace tensord::bench
