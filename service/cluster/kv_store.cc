#include "service/cluster/kv_store.h"

#include <grpcpp/client_context.h>

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"

namespace tensord {

void KvWatchCancel::Cancel() {
  std::function<void()> wake;
  {
    MutexLock lock(&mu_);
    cancelled_ = true;
    if (context_ != nullptr) context_->TryCancel();
    wake = wake_;
  }
  if (wake) wake();
}

bool KvWatchCancel::cancelled() const {
  MutexLock lock(&mu_);
  return cancelled_;
}

std::string KvPrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // etcd's "to the end of the key space"
}

namespace {
constexpr absl::string_view kTimedOutPayload = "tensord/kv-timed-out";
}  // namespace

absl::Status KvTimedOut(absl::string_view message) {
  absl::Status status = absl::UnavailableError(message);
  status.SetPayload(kTimedOutPayload, absl::Cord("1"));
  return status;
}

bool IsKvTimedOut(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable &&
         status.GetPayload(kTimedOutPayload).has_value();
}

absl::StatusOr<std::optional<EtcdKeyValue>> KvGet(KvStore& store, absl::string_view key) {
  const KvOp get = KvOp::Get(std::string(key));
  TENSORD_ASSIGN_OR_RETURN(KvTxnResult result, store.Txn({}, {&get, 1}, {}));
  if (result.results.size() != 1 || result.results[0].values.size() > 1) {
    return absl::DataLossError(
        absl::StrCat("the store answered a get of '", key, "' with more than one key"));
  }
  if (result.results[0].values.empty()) return std::nullopt;
  return std::move(result.results[0].values[0]);
}

absl::StatusOr<int64_t> KvRevisionNow(KvStore& store) {
  // Any one key, present or not: the answer's revision is what counts.
  TENSORD_ASSIGN_OR_RETURN(KvPage page, store.Range(std::string(1, '\0'), "", 0, 1));
  return page.revision;
}

namespace {

// Whether the range end `a` comes before `b` ("\0" is the end of the key
// space, after every key).
bool EndsBefore(absl::string_view a, absl::string_view b) {
  const absl::string_view everything("\0", 1);
  if (a == everything) return false;
  if (b == everything) return true;
  return a < b;
}

}  // namespace

absl::StatusOr<KvPage> KvRangePage(KvStore& store, absl::string_view from,
                                   absl::string_view range_end, int64_t revision, int64_t limit) {
  // Windows: keys starting with all of `from`, then with one byte less,
  // and so on; the last one is the whole range.
  // (A key starting with all of a next-page `from`, "<last key>\0", is
  // rare: that window is skipped.)
  const size_t longest = !from.empty() && from.back() == '\0' ? from.size() - 1 : from.size();
  for (size_t length = longest;; --length) {
    std::string window_end =
        length == 0 ? std::string(range_end) : KvPrefixEnd(from.substr(0, length));
    const bool whole = !EndsBefore(window_end, range_end);
    if (whole) window_end = std::string(range_end);
    TENSORD_ASSIGN_OR_RETURN(KvPage page, store.Range(from, window_end, revision, limit));
    // Every window is read as of the first one's revision: one cut.
    if (revision == 0) revision = page.revision;
    if (whole) return page;
    if (limit > 0 && static_cast<int64_t>(page.values.size()) >= limit) {
      page.more = true;  // keys may follow, in this window or after it
      return page;
    }
  }
}

absl::StatusOr<int64_t> KvReadPrefix(
    KvStore& store, absl::string_view prefix, int64_t page_size,
    const std::function<void(std::vector<EtcdKeyValue>)>& on_page) {
  const std::string end = KvPrefixEnd(prefix);
  std::string from(prefix);
  int64_t revision = 0;
  while (true) {
    TENSORD_ASSIGN_OR_RETURN(KvPage page, KvRangePage(store, from, end, revision, page_size));
    // A page says the store's revision now; every later page is read at
    // the first one's, so the whole read is one cut.
    if (revision == 0) revision = page.revision;
    if (page.values.empty()) return revision;
    // The next page starts just after this one's last key.
    from = page.values.back().key + std::string(1, '\0');
    const bool more = page.more;
    on_page(std::move(page.values));
    if (!more) return revision;
  }
}

}  // namespace tensord
