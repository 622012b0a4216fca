// The Python side of the batch calls: the items they take, and
// tensord.BatchPutResult, which gives each item's TensorInfo or error.
#ifndef TENSORD_PYTHON_SRC_BATCH_ITEMS_H_
#define TENSORD_PYTHON_SRC_BATCH_ITEMS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>

#include "python/src/dlpack_import.h"
#include "tensord/client.h"

namespace tensord::python {

// The items of a batch_put, each producer's tensor imported. `items` point
// into `tensors`, so the batch must outlive any use of them.
struct ImportedBatch {
  std::vector<ImportedTensor> tensors;
  std::vector<BatchPutItem> items;
};

// `items`: a mapping of name to DLPack producer (anything with keys(), as
// dict() decides), or an iterable of (name, producer) pairs. Every item gets
// `retention`. TypeError naming the item when one is neither; the
// producers' own errors as ImportDlpack raises them.
ImportedBatch ImportBatchPutItems(nanobind::handle items, Retention retention);

// `refs`: an iterable of names (latest version) and (name, version) pairs
// (version None or a positive int). TypeError/ValueError naming the item.
std::vector<TensorRef> TensorRefsArgument(nanobind::handle refs);

// tensord.BatchPutResult: one entry per item, in order, each the item's
// TensorInfo or the tensord.Error that says why it was not published.
class PythonBatchPutResult {
 public:
  // Needs the GIL (it makes Python objects).
  PythonBatchPutResult(BatchPutResult result, std::span<const BatchPutItem> items);

  const nanobind::list& items() const { return items_; }
  std::optional<uint64_t> group_version() const { return group_version_; }
  std::optional<uint64_t> cluster_group() const { return cluster_group_; }
  bool ok() const { return failed_indexes_.empty(); }
  // [(name, tensord.Error)] of the items that failed, in order.
  nanobind::list errors() const;
  std::string Repr() const;

 private:
  nanobind::list items_;
  std::vector<std::string> names_;
  std::vector<size_t> failed_indexes_;
  std::optional<uint64_t> group_version_;
  std::optional<uint64_t> cluster_group_;
};

void BindBatchPutResult(nanobind::module_& module);

// Client.seal_group's answer: the items, and the group's version and cluster
// group; a sequence of its items too (len, index, iteration), as the list
// seal_group returned before.
void BindSealGroupResult(nanobind::module_& module);

}  // namespace tensord::python

#endif  // TENSORD_PYTHON_SRC_BATCH_ITEMS_H_
