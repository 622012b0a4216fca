#include "service/transport/open_watches.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tensord {

absl::StatusOr<uint64_t> OpenWatches::Open(std::function<void(const absl::Status&)> end) {
  MutexLock lock(&mutex_);
  if (ended_.has_value()) return *ended_;
  if (open_.size() >= max_watches_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this server has ", open_.size(), " Watch calls open, the limit (--max-watches) is ",
        max_watches_, "; end a watch or raise the limit"));
  }
  const uint64_t id = next_id_++;
  open_.emplace(id, std::move(end));
  return id;
}

void OpenWatches::Close(uint64_t id) {
  MutexLock lock(&mutex_);
  open_.erase(id);
}

void OpenWatches::EndAll(const absl::Status& status) {
  // Under the lock, so a watch cannot Close (and be freed) while its end
  // runs; `end` only asks gRPC to finish and never calls back in here.
  MutexLock lock(&mutex_);
  if (!ended_.has_value()) ended_ = status;
  for (auto& [id, end] : open_) end(status);
}

size_t OpenWatches::count() const {
  ReaderMutexLock lock(&mutex_);
  return open_.size();
}

}  // namespace tensord
