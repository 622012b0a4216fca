// Helpers every section uses: clients, byte tensors, puts and checks.
#include "absl/strings/str_cat.h"
#include "bench/baselines.h"
#include "bench/cases.h"
#include "service/common/status_macros.h"

namespace tensord::bench {

absl::StatusOr<std::unique_ptr<Client>> ConnectClient(const BenchEnv& env, TransferPath path,
                                                      uint64_t receive_pool_bytes) {
  return ConnectClient(env.tensord_target, path, receive_pool_bytes);
}

absl::StatusOr<std::unique_ptr<Client>> ConnectClient(const std::string& target, TransferPath path,
                                                      uint64_t receive_pool_bytes) {
  ClientOptions options;
  options.receive_pool_bytes = receive_pool_bytes;
  options.server = target;
  options.own_connection = true;
  options.path = path;
  return Client::Connect(options);
}

DLTensor ByteTensor(const void* data, const int64_t* shape) {
  DLTensor tensor{};
  tensor.data = const_cast<void*>(data);
  tensor.device = {kDLCPU, 0};
  tensor.ndim = 1;
  tensor.dtype = {kDLUInt, 8, 1};
  tensor.shape = const_cast<int64_t*>(shape);
  tensor.strides = nullptr;
  tensor.byte_offset = 0;
  return tensor;
}

std::string TensorName(const std::string& kind, uint64_t bytes) {
  return absl::StrCat("bench/", kind, "/", bytes);
}

absl::Status CheckFetched(const Tensor& tensor, uint64_t bytes, const std::string& what) {
  return CheckFetched(tensor, PatternSpots(bytes, kPatternSeed), bytes, what);
}

absl::Status CheckFetched(const Tensor& tensor, const PatternSpots& spots, uint64_t bytes,
                          const std::string& what) {
  if (tensor.empty()) return absl::DataLossError(absl::StrCat(what, ": fetch returned no tensor"));
  if (tensor.data_bytes() != bytes || tensor.info().total_bytes != bytes) {
    return absl::DataLossError(absl::StrCat(what, ": fetched ", tensor.data_bytes(),
                                            " bytes (info says ", tensor.info().total_bytes,
                                            "), expected ", bytes));
  }
  return spots.Check(tensor.dl_tensor().data, what);
}

absl::StatusOr<TensorInfo> PutSource(const BenchEnv& env, Client& client, const std::string& kind,
                                     uint64_t bytes) {
  const int64_t shape = static_cast<int64_t>(bytes);
  const std::string name = TensorName(kind, bytes);
  TENSORD_ASSIGN_OR_RETURN(TensorInfo info,
                           client.Put(name, ByteTensor(env.source.data(), &shape)));
  if (info.name != name || info.total_bytes != bytes) {
    return absl::DataLossError(absl::StrCat("put of ", bytes, " bytes as '", name, "' stored '",
                                            info.name, "' with ", info.total_bytes, " bytes"));
  }
  return info;
}

absl::Status EnsureRemoteTensor(const BenchEnv& env, Client& client, uint64_t bytes) {
  absl::StatusOr<TensorInfo> stat = client.Stat(TensorName("remote", bytes));
  if (stat.ok() && stat->total_bytes == bytes) return absl::OkStatus();
  return PutSource(env, client, "remote", bytes).status();
}

absl::StatusOr<double> TimedRawTransfer(const BenchEnv& env, RawTcpLink& link, uint64_t bytes) {
  ScribbleSpots(env.destination.data(), bytes, kPatternSeed);
  TENSORD_ASSIGN_OR_RETURN(double seconds, link.Transfer(bytes));
  TENSORD_RETURN_IF_ERROR(CheckPattern(env.destination.data(), bytes, kPatternSeed, "raw TCP"));
  return seconds;
}

absl::StatusOr<double> TimedFetchInto(const BenchEnv& env, Client& client, const std::string& name,
                                      uint64_t bytes, Clock::time_point start,
                                      const FetchOptions& options) {
  const int64_t shape = static_cast<int64_t>(bytes);
  TENSORD_ASSIGN_OR_RETURN(
      TensorInfo info, client.FetchInto(name, ByteTensor(env.destination.data(), &shape), options));
  const double seconds = SecondsSince(start);
  if (info.total_bytes != bytes) {
    return absl::DataLossError(absl::StrCat("FetchInto of ", name, " says ", info.total_bytes,
                                            " bytes, expected ", bytes));
  }
  TENSORD_RETURN_IF_ERROR(CheckPattern(env.destination.data(), bytes, kPatternSeed,
                                       absl::StrCat("remote FetchInto of ", name)));
  return seconds;
}

}  // namespace tensord::bench
