#include "service/cluster/kv_store.h"

#include <grpcpp/client_context.h>

#include <utility>

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

absl::StatusOr<std::optional<EtcdKeyValue>> KvGet(KvStore& store, absl::string_view key) {
  const KvOp get = KvOp::Get(std::string(key));
  TENSORD_ASSIGN_OR_RETURN(KvTxnResult result, store.Txn({}, {&get, 1}, {}));
  if (result.results.size() != 1 || result.results[0].values.size() > 1) {
    return absl::DataLossError(absl::StrCat("the store answered a get of '", key,
                                            "' with more than one key"));
  }
  if (result.results[0].values.empty()) return std::nullopt;
  return std::move(result.results[0].values[0]);
}

absl::StatusOr<int64_t> KvReadPrefix(
    KvStore& store, absl::string_view prefix, int64_t page_size,
    const std::function<void(std::vector<EtcdKeyValue>)>& on_page) {
  const std::string end = KvPrefixEnd(prefix);
  std::string from(prefix);
  int64_t revision = 0;
  while (true) {
    TENSORD_ASSIGN_OR_RETURN(KvPage page, store.Range(from, end, revision, page_size));
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
