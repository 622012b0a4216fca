#include "bench/call_loop.h"

#include <cstdio>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/cases.h"
#include "bench/empty_server.h"
#include "service/common/status_macros.h"

namespace tensord::bench {
namespace {

constexpr int kWarmupCalls = 300;

absl::Status Loop(const std::string& kind, const std::string& target, uint64_t calls) {
  Operation call;
  if (kind == "empty") {
    TENSORD_ASSIGN_OR_RETURN(call, MakeEmptyCall(target));
  } else if (kind == "payload") {
    TENSORD_ASSIGN_OR_RETURN(call, MakePayloadCall(target));
  } else if (kind == "empty-client-path") {
    TENSORD_ASSIGN_OR_RETURN(call, MakeClientPathEmptyCall(target));
  } else {
    TENSORD_ASSIGN_OR_RETURN(std::shared_ptr<Client> client,
                             ConnectClient(target, TransferPath::kRemote));
    if (kind == "put") {
      std::vector<uint8_t> bytes(kSmallOpBytes);
      FillPattern(bytes.data(), bytes.size(), kPatternSeed);  // what the fetch checks
      const int64_t shape[1] = {static_cast<int64_t>(kSmallOpBytes)};
      return client->Put(TensorName("small", kSmallOpBytes), ByteTensor(bytes.data(), shape))
          .status();
    }
    if (kind == "put-cache") {
      // Overwrites one cache-retention name: on a cluster node, the put a
      // KV-cache block pays (no etcd write).
      auto bytes = std::make_shared<std::vector<uint8_t>>(kSmallOpBytes);
      FillPattern(bytes->data(), bytes->size(), kPatternSeed);
      call = [client, bytes]() -> absl::Status {
        const int64_t shape[1] = {static_cast<int64_t>(kSmallOpBytes)};
        PutOptions options;
        options.retention = Retention::kCache;
        return client
            ->Put(TensorName("small-cache", kSmallOpBytes), ByteTensor(bytes->data(), shape),
                  options)
            .status();
      };
    } else if (kind == "stat") {
      call = SmallStatCall(std::move(client));
    } else if (kind == "fetch") {
      call = SmallFetchCall(std::move(client));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--call-loop: unknown kind '", kind,
                       "' (empty, empty-client-path, payload, stat, fetch, put, put-cache)"));
    }
  }
  for (int i = 0; i < kWarmupCalls; ++i) TENSORD_RETURN_IF_ERROR(call());
  for (uint64_t i = 0; i < calls; ++i) TENSORD_RETURN_IF_ERROR(call());
  return absl::OkStatus();
}

}  // namespace

int RunCallLoop(const std::string& kind, const std::string& target, uint64_t calls) {
  if (absl::Status status = Loop(kind, target, calls); !status.ok()) {
    std::fprintf(stderr, "tensord-bench --call-loop=%s: %s\n", kind.c_str(),
                 status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace tensord::bench
