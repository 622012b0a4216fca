#include "client/src/transfer_plan.h"

#include <grpcpp/grpcpp.h>

#include <sys/random.h>

#include <cerrno>
#include <chrono>
#include <deque>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/src/info_conversion.h"
#include "client/src/slice_latch.h"
#include "service/common/crc32c.h"
#include "service/common/errno_status.h"
#include "service/common/status_macros.h"

namespace tensord {
namespace {

// The progress of a transfer in parts: each part's own count is added into
// one total, reported under one lock so the caller sees totals in order.
class PartProgress {
 public:
  PartProgress(const ProgressCallback& report, uint64_t total) : report_(report), total_(total) {}

  // Part i's callback (one per part, used by that part's thread only);
  // empty when nobody listens.
  ProgressCallback ForPart() {
    if (!report_) return ProgressCallback();
    MutexLock lock(&mutex_);
    uint64_t* reported = &reported_.emplace_back(0);
    return [this, reported](uint64_t done, uint64_t) {
      MutexLock lock(&mutex_);
      sum_ += done - *reported;
      *reported = done;
      report_(sum_, total_);
    };
  }

 private:
  const ProgressCallback& report_;
  const uint64_t total_;
  Mutex mutex_;
  // Per part; stable addresses.
  std::deque<uint64_t> reported_ ABSL_GUARDED_BY(mutex_);
  uint64_t sum_ ABSL_GUARDED_BY(mutex_) = 0;
};

// The server inlines a range up to this size in the fetch header.
constexpr uint64_t kMaxInlineFetchBytes = 32 * 1024;
// Names a client remembers as large (TransferPlan::large_names_); forgotten
// all at once when this many.
constexpr size_t kMaxLargeNames = 4096;

// 128 random bits naming one put in parts (PutPart.upload_id).
absl::StatusOr<std::string> NewUploadId() {
  char random[16];
  size_t filled = 0;
  while (filled < sizeof(random)) {
    const ssize_t n = ::getrandom(random + filled, sizeof(random) - filled, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "getrandom");
    }
    filled += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(absl::string_view(random, sizeof(random)));
}

}  // namespace

bool TransferPlan::ShouldFetchInline(absl::string_view name,
                                     std::optional<uint64_t> expected_bytes) {
  if (expected_bytes.has_value()) return *expected_bytes <= kMaxInlineFetchBytes;
  MutexLock lock(&large_names_mutex_);
  return !large_names_.contains(name);
}

void TransferPlan::RememberLarge(absl::string_view name) {
  MutexLock lock(&large_names_mutex_);
  if (large_names_.size() >= kMaxLargeNames) large_names_.clear();
  large_names_.emplace(name);
}

absl::StatusOr<TensorInfo> TransferPlan::Fetch(absl::string_view name,
                                               const FetchOptions& fetch_options,
                                               const CallOptions& call,
                                               FetchStreamReceiver::DestinationFor destination_for,
                                               std::optional<uint64_t> expected_bytes) {
  TENSORD_RETURN_IF_ERROR(ValidateTransferStreams(fetch_options.streams));
  const unsigned cores = HostCores();
  const uint64_t split_above =
      SplitAboveBytes(TransferDirection::kFetch, fetch_options.streams, cores);
  std::optional<StreamedRange> answered;
  if (ShouldFetchInline(name, expected_bytes)) {
    TENSORD_ASSIGN_OR_RETURN(answered,
                             connection_.FetchInline(name, fetch_options, call, destination_for));
    if (answered.has_value() && answered->split) RememberLarge(name);
  }
  if (answered.has_value() && !answered->split) return std::move(answered->info);
  v1::FetchRequest request = FetchRequestFor(name, fetch_options);
  if (!answered.has_value()) {
    request.set_split_above_bytes(split_above);
    CallContext context(connection_, call);
    TENSORD_ASSIGN_OR_RETURN(answered,
                             connection_.StreamFetch(*connection_.channel, context.get(), request,
                                                     fetch_options, destination_for));
  }
  StreamedRange whole = *std::move(answered);
  if (!whole.split) return std::move(whole.info);
  // One stream of the whole, which holds its version to the end (the
  // destination is asked for again).
  auto stream_whole = [&]() -> absl::StatusOr<TensorInfo> {
    request.set_split_above_bytes(0);
    CallContext context(connection_, call);
    TENSORD_ASSIGN_OR_RETURN(StreamedRange streamed,
                             connection_.StreamFetch(*connection_.channel, context.get(), request,
                                                     fetch_options, destination_for));
    return std::move(streamed.info);
  };
  // Version 0: a copy the server is still receiving from another node of
  // a cluster. Its parts could not name a version; the stream is passed
  // the bytes as they arrive.
  if (whole.info.version == 0) return stream_whole();

  // Every part asks for the version the header named, so a put meanwhile
  // cannot mix two versions.
  TENSORD_ASSIGN_OR_RETURN(uint8_t * destination, destination_for(whole.info, whole.length));
  absl::StatusOr<TensorInfo> assembled =
      FetchParts(name, fetch_options, call, destination, whole, split_above, cores);
  // A split header holds no lease: the version it named may have been
  // replaced and dropped before its parts were asked for. A fetch of the
  // latest version then takes one stream.
  if (assembled.status().code() == absl::StatusCode::kNotFound && fetch_options.version == 0) {
    return stream_whole();
  }
  return assembled;
}

absl::StatusOr<TensorInfo> TransferPlan::FetchParts(absl::string_view name,
                                                    const FetchOptions& fetch_options,
                                                    const CallOptions& call, uint8_t* destination,
                                                    const StreamedRange& whole,
                                                    uint64_t split_above, unsigned cores) {
  // A split from FetchInline may be below the parallel threshold: one part.
  const uint32_t part_count = split_above != 0 && whole.length > split_above
                                  ? TransferStreamsFor(TransferDirection::kFetch, whole.length,
                                                       fetch_options.streams, cores)
                                  : 1;
  const std::vector<TransferPart> parts = SplitIntoParts(whole.offset, whole.length, part_count);
  PartProgress progress(fetch_options.progress, whole.length);
  std::vector<std::unique_ptr<CallContext>> contexts = connection_.PartContexts(parts.size(), call);
  std::vector<absl::StatusOr<StreamedRange>> results(parts.size(), absl::UnknownError("not run"));
  auto fetch_part = [&](size_t index) {
    const TransferPart part = parts[index];
    v1::FetchRequest part_request;
    part_request.set_name(std::string(name));
    part_request.set_version(whole.info.version);
    part_request.mutable_range()->set_offset(part.offset);
    part_request.mutable_range()->set_length(part.length);
    FetchOptions options_for_part = fetch_options;
    options_for_part.progress = progress.ForPart();
    results[index] = connection_.StreamFetch(
        connection_.PartChannel(index), contexts[index]->get(), part_request, options_for_part,
        [&](const TensorInfo&, uint64_t length) -> absl::StatusOr<uint8_t*> {
          if (length != part.length) {
            return absl::InternalError(absl::StrCat("server sent ", length, " bytes for part [",
                                                    part.offset, ", +", part.length, ")"));
          }
          return destination + (part.offset - whole.offset);
        });
    // The bytes went where this part belongs only if the server answered
    // for this part's range, not just with its length.
    if (results[index].ok() && results[index]->offset != part.offset) {
      results[index] = absl::InternalError(
          absl::StrCat("server answered part [", part.offset, ", +", part.length, ") of '", name,
                       "' with the range at ", results[index]->offset));
    }
    // One part failing ends the others at once.
    if (!results[index].ok()) {
      for (const auto& context : contexts) context->get().TryCancel();
    }
  };
  const std::string what = absl::StrCat("the fetch of '", name, "'");
  TENSORD_RETURN_IF_ERROR(RunParts(parts.size(), fetch_part, contexts, what));
  const bool deadline_passed =
      std::chrono::system_clock::now() >= contexts.front()->get().deadline();

  // The first failure that is not another part's cancellation names the cause.
  std::vector<absl::Status> outcomes;
  for (const absl::StatusOr<StreamedRange>& result : results) outcomes.push_back(result.status());
  TENSORD_RETURN_IF_ERROR(
      CauseOfFailedParts(outcomes, {absl::StatusCode::kCancelled}, deadline_passed, what));
  if (fetch_options.verify_crc32c && whole.offset == 0 && whole.length == whole.info.total_bytes) {
    uint32_t crc = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      crc = Crc32cCombine(crc, results[i]->crc32c, parts[i].length);
    }
    if (crc != whole.info.crc32c) {
      return absl::DataLossError(absl::StrCat("fetched bytes of '", whole.info.name,
                                              "' have crc32c ", crc, "; the server stored ",
                                              whole.info.crc32c));
    }
  }
  return std::move(whole.info);
}

absl::Status TransferPlan::RunParts(size_t count, const std::function<void(size_t)>& run,
                                    std::vector<std::unique_ptr<CallContext>>& contexts,
                                    absl::string_view what) {
  std::vector<std::thread> threads;
  absl::Status start_failure;
  for (size_t i = 1; i < count; ++i) {
    try {
      threads.emplace_back(run, i);
    } catch (const std::system_error& error) {
      // No thread for this part (a thread limit): the transfer fails whole,
      // after the parts already running are cancelled and joined.
      start_failure = absl::ResourceExhaustedError(
          absl::StrCat("cannot start a thread for part ", i, " of ", what, ": ", error.what()));
      for (const auto& context : contexts) context->get().TryCancel();
      break;
    }
  }
  if (start_failure.ok()) run(0);
  for (std::thread& thread : threads) thread.join();
  return start_failure;
}

absl::StatusOr<TensorInfo> TransferPlan::PutParts(const v1::PutRequest& header, const uint8_t* data,
                                                  const PutOptions& put_options,
                                                  const CallOptions& call,
                                                  const std::vector<TransferPart>& parts) {
  TENSORD_ASSIGN_OR_RETURN(const std::string upload_id, NewUploadId());
  PartProgress progress(put_options.progress, header.header().total_bytes());
  SliceLatch latch;  // every part's chunks; before the contexts (SliceLatch)
  std::vector<std::unique_ptr<CallContext>> contexts = connection_.PartContexts(parts.size(), call);
  std::vector<absl::StatusOr<v1::PutResponse>> results(parts.size(), absl::UnknownError("not run"));
  auto put_part = [&](size_t index) {
    const TransferPart part = parts[index];
    v1::PutRequest part_header = header;
    v1::PutPart* wire_part = part_header.mutable_header()->mutable_part();
    wire_part->set_upload_id(upload_id);
    wire_part->set_parts(static_cast<uint32_t>(parts.size()));
    wire_part->set_offset(part.offset);
    wire_part->set_length(part.length);
    results[index] = connection_.StreamPut(connection_.PartChannel(index),
                                           connection_.put_part_method, contexts[index]->get(),
                                           part_header, data, part, progress.ForPart(), latch);
    // One part failing fails the put on the server; end the others at once.
    if (!results[index].ok()) {
      for (const auto& context : contexts) context->get().TryCancel();
    }
  };
  const std::string what = absl::StrCat("the put of '", header.header().name(), "'");
  const absl::Status started = RunParts(parts.size(), put_part, contexts, what);
  const bool deadline_passed =
      std::chrono::system_clock::now() >= contexts.front()->get().deadline();
  contexts.clear();  // gives back the chunks of parts that ended early
  latch.Wait();
  TENSORD_RETURN_IF_ERROR(started);
  // The cause, not the other parts' cancellation or the server's ABORTED
  // echo of it.
  std::vector<absl::Status> outcomes;
  for (const absl::StatusOr<v1::PutResponse>& result : results) outcomes.push_back(result.status());
  TENSORD_RETURN_IF_ERROR(CauseOfFailedParts(
      outcomes, {absl::StatusCode::kCancelled, absl::StatusCode::kAborted}, deadline_passed, what));
  return InfoFromProto(results[0]->info());
}

absl::StatusOr<TensorInfo> TransferPlan::Put(const v1::PutRequest& header, const uint8_t* data,
                                             uint64_t size, const PutOptions& options,
                                             const CallOptions& call) {
  const unsigned cores = HostCores();
  const uint64_t split_above = SplitAboveBytes(TransferDirection::kPut, options.streams, cores);
  // A device put goes through the server's one staged upload, in order.
  if (!options.device.has_value() && split_above != 0 && size > split_above) {
    const uint32_t streams =
        TransferStreamsFor(TransferDirection::kPut, size, options.streams, cores);
    if (streams > 1) {
      return PutParts(header, data, options, call, SplitIntoParts(0, size, streams));
    }
  }
  SliceLatch latch;
  absl::StatusOr<v1::PutResponse> response;
  {
    CallContext context(connection_, call);
    response = connection_.StreamPut(*connection_.channel, connection_.put_method, context.get(),
                                     header, data, TransferPart{0, size}, options.progress, latch);
  }  // the context goes first: see StreamPut
  latch.Wait();
  TENSORD_RETURN_IF_ERROR(response.status());
  return InfoFromProto(response->info());
}

}  // namespace tensord
