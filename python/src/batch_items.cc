#include "python/src/batch_items.h"

#include <cstdint>
#include <utility>

#include <nanobind/make_iterator.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "absl/strings/str_cat.h"
#include "python/src/arguments.h"
#include "python/src/status_error.h"

namespace tensord::python {
namespace {

namespace nb = nanobind;

std::string TypeName(nb::handle value) { return nb::type_name(value.type()).c_str(); }

// A str is iterable too, but a batch of its characters is never what was meant.
void CheckIterable(nb::handle items, const char* call, const char* expected) {
  if (nb::isinstance<nb::str>(items) || !nb::hasattr(items, "__iter__")) {
    throw nb::type_error(
        absl::StrCat(call, " takes ", expected, ", got ", TypeName(items)).c_str());
  }
}

// The two halves of a (name, value) pair given as a tuple or a list.
std::optional<std::pair<nb::object, nb::object>> SplitPair(nb::handle pair) {
  if (!(nb::isinstance<nb::tuple>(pair) || nb::isinstance<nb::list>(pair)) || nb::len(pair) != 2) {
    return std::nullopt;
  }
  return std::make_pair(nb::borrow(pair[0]), nb::borrow(pair[1]));
}

std::string NameOfItem(nb::handle name, const char* call, size_t index) {
  std::string text;
  if (!nb::try_cast(name, text, false)) {
    throw nb::type_error(
        absl::StrCat(call, " item ", index, ": the name must be a str, got ", TypeName(name))
            .c_str());
  }
  return text;
}

}  // namespace

ImportedBatch ImportBatchPutItems(nb::handle items, Retention retention) {
  constexpr char kExpected[] = "a mapping of name to tensor or an iterable of (name, tensor) pairs";
  nb::object pairs = nb::hasattr(items, "keys") ? items.attr("items")() : nb::borrow(items);
  CheckIterable(pairs, "batch_put", kExpected);
  ImportedBatch batch;
  size_t index = 0;
  for (nb::handle pair : pairs) {
    std::optional<std::pair<nb::object, nb::object>> parts = SplitPair(pair);
    if (!parts.has_value()) {
      throw nb::type_error(absl::StrCat("batch_put item ", index,
                                        ": expected a (name, tensor) pair, got ", TypeName(pair))
                               .c_str());
    }
    std::string name = NameOfItem(parts->first, "batch_put", index);
    const std::string call = absl::StrCat("batch_put (item '", name, "')");
    batch.tensors.push_back(ImportDlpack(parts->second, call.c_str()));
    batch.items.push_back(
        BatchPutItem{std::move(name), batch.tensors.back().dl_tensor(), retention});
    ++index;
  }
  return batch;
}

std::vector<TensorRef> TensorRefsArgument(nb::handle refs) {
  CheckIterable(refs, "batch_fetch", "an iterable of names or (name, version) pairs");
  std::vector<TensorRef> wanted;
  size_t index = 0;
  for (nb::handle ref : refs) {
    if (nb::isinstance<nb::str>(ref)) {
      wanted.push_back(TensorRef{nb::cast<std::string>(ref), 0});
    } else if (std::optional<std::pair<nb::object, nb::object>> parts = SplitPair(ref);
               parts.has_value()) {
      std::optional<int64_t> version;
      if (!nb::try_cast(parts->second, version, false)) {
        throw nb::type_error(absl::StrCat("batch_fetch item ", index,
                                          ": the version must be None or an int, got ",
                                          TypeName(parts->second))
                                 .c_str());
      }
      std::string name = NameOfItem(parts->first, "batch_fetch", index);
      wanted.push_back(TensorRef{std::move(name), VersionArgument(version)});
    } else {
      throw nb::type_error(absl::StrCat("batch_fetch item ", index,
                                        ": expected a name or a (name, version) pair, got ",
                                        TypeName(ref))
                               .c_str());
    }
    ++index;
  }
  return wanted;
}

PythonBatchPutResult::PythonBatchPutResult(BatchPutResult result,
                                           std::span<const BatchPutItem> items) {
  names_.reserve(items.size());
  for (const BatchPutItem& item : items) names_.push_back(item.name);
  for (size_t i = 0; i < result.items.size(); ++i) {
    absl::StatusOr<TensorInfo>& item = result.items[i];
    if (item.ok()) {
      items_.append(nb::cast(*std::move(item)));
    } else {
      items_.append(StatusErrorObject(item.status()));
      failed_indexes_.push_back(i);
    }
  }
  if (result.group_version != 0) group_version_ = result.group_version;
  if (result.cluster_group != 0) cluster_group_ = result.cluster_group;
}

nb::list PythonBatchPutResult::errors() const {
  nb::list errors;
  for (size_t i : failed_indexes_) errors.append(nb::make_tuple(names_[i], items_[i]));
  return errors;
}

std::string PythonBatchPutResult::Repr() const {
  const size_t failed = failed_indexes_.size();
  return absl::StrCat(
      "tensord.BatchPutResult(published=", nb::len(items_) - failed, ", failed=", failed,
      ", group_version=", group_version_.has_value() ? absl::StrCat(*group_version_) : "None", ")");
}

void BindBatchPutResult(nb::module_& module) {
  nb::class_<PythonBatchPutResult>(
      module, "BatchPutResult",
      "What a batch_put did: per item, in order, its TensorInfo or the "
      "tensord.Error that says why it was not published.")
      .def_prop_ro("items", &PythonBatchPutResult::items,
                   "One entry per item, in order: a TensorInfo, or a tensord.Error (not raised).")
      .def_prop_ro(
          "group_version", &PythonBatchPutResult::group_version,
          "The version every item of a published atomic batch has (for batch_fetch_group); "
          "None for a plain batch or a refused atomic one.")
      .def_prop_ro(
          "cluster_group", &PythonBatchPutResult::cluster_group,
          "In a cluster, a published atomic batch of durable names: the etcd revision that "
          "ordered it (for batch_fetch_cluster_group on any node); None otherwise.")
      .def_prop_ro("ok", &PythonBatchPutResult::ok, "True when every item was published.")
      .def_prop_ro("errors", &PythonBatchPutResult::errors,
                   "[(name, tensord.Error)] of the items not published, in order.")
      .def("__repr__", &PythonBatchPutResult::Repr);
}

void BindSealGroupResult(nb::module_& module) {
  nb::class_<SealGroupResult>(
      module, "SealGroupResult",
      "What seal_group published: every writer's TensorInfo, in order, all under one version. "
      "A sequence of those TensorInfos too.")
      .def_ro("items", &SealGroupResult::items, "The TensorInfos, in the writers' order.")
      .def_ro("group_version", &SealGroupResult::group_version,
              "The version every item has (for batch_fetch_group).")
      .def_prop_ro(
          "cluster_group",
          [](const SealGroupResult& result) -> std::optional<uint64_t> {
            if (result.cluster_group == 0) return std::nullopt;
            return result.cluster_group;
          },
          "In a cluster, a group of durable names: the etcd revision that ordered it (for "
          "batch_fetch_cluster_group on any node); None otherwise.")
      .def("__len__", [](const SealGroupResult& result) { return result.items.size(); })
      .def("__getitem__",
           [](const SealGroupResult& result, int64_t index) {
             const auto size = static_cast<int64_t>(result.items.size());
             if (index < 0) index += size;
             if (index < 0 || index >= size) {
               throw nb::index_error(
                   absl::StrCat("SealGroupResult index ", index, " out of range").c_str());
             }
             return result.items[static_cast<size_t>(index)];
           })
      .def(
          "__iter__",
          [](const SealGroupResult& result) {
            return nb::make_iterator(nb::type<SealGroupResult>(), "SealGroupResultIterator",
                                     result.items.begin(), result.items.end());
          },
          nb::keep_alive<0, 1>())
      .def("__repr__", [](const SealGroupResult& result) {
        return absl::StrCat("tensord.SealGroupResult(items=", result.items.size(),
                            ", group_version=", result.group_version, ", cluster_group=",
                            result.cluster_group == 0 ? "None" : absl::StrCat(result.cluster_group),
                            ")");
      });
}

}  // namespace tensord::python
