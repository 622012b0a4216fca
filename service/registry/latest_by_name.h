// The registry's latest version of every name, kept twice over: ordered
// (prefix listing, page tokens) and hashed, so that finding one name is a
// probe or two instead of log2(names) string comparisons, each a cache miss
// at a million names. The hash index holds only the ordered map's
// iterators (8 bytes a slot), keyed by the node's own name.
#ifndef TENSORD_SERVICE_REGISTRY_LATEST_BY_NAME_H_
#define TENSORD_SERVICE_REGISTRY_LATEST_BY_NAME_H_

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace tensord {

template <typename Value>
class LatestByName {
 public:
  using Ordered = std::map<std::string, Value, std::less<>>;
  using iterator = typename Ordered::iterator;
  using const_iterator = typename Ordered::const_iterator;

  LatestByName() = default;
  // The index points into ordered_'s nodes: a copy would point into the
  // original's.
  LatestByName(const LatestByName&) = delete;
  LatestByName& operator=(const LatestByName&) = delete;

  // Names come as std::string, absl::string_view or std::string_view
  // (Debian's Abseil has a string_view of its own).
  template <typename Name>
  iterator find(const Name& name) {
    auto found = index_.find(View(name));
    return found == index_.end() ? ordered_.end() : *found;
  }
  template <typename Name>
  const_iterator find(const Name& name) const {
    auto found = index_.find(View(name));
    return found == index_.end() ? ordered_.end() : const_iterator(*found);
  }
  template <typename Name>
  bool contains(const Name& name) const {
    return index_.contains(View(name));
  }

  // As std::map::emplace: nothing changes when the name is present.
  std::pair<iterator, bool> emplace(std::string name, Value value) {
    auto placed = ordered_.emplace(std::move(name), std::move(value));
    if (placed.second) index_.insert(placed.first);
    return placed;
  }

  iterator erase(iterator at) {
    // Out of the index first: its key is the node's own name.
    index_.erase(at->first);
    return ordered_.erase(at);
  }

  iterator begin() { return ordered_.begin(); }
  iterator end() { return ordered_.end(); }
  const_iterator begin() const { return ordered_.begin(); }
  const_iterator end() const { return ordered_.end(); }
  template <typename Name>
  iterator lower_bound(const Name& name) {
    return ordered_.lower_bound(View(name));
  }
  template <typename Name>
  iterator upper_bound(const Name& name) {
    return ordered_.upper_bound(View(name));
  }
  template <typename Name>
  const_iterator lower_bound(const Name& name) const {
    return ordered_.lower_bound(View(name));
  }
  template <typename Name>
  const_iterator upper_bound(const Name& name) const {
    return ordered_.upper_bound(View(name));
  }
  size_t size() const { return ordered_.size(); }
  bool empty() const { return ordered_.empty(); }

 private:
  static absl::string_view View(absl::string_view name) { return name; }
  static absl::string_view View(const std::string& name) { return name; }
  static absl::string_view View(const char* name) { return name; }
#ifndef ABSL_USES_STD_STRING_VIEW
  static absl::string_view View(std::string_view name) {
    return absl::string_view(name.data(), name.size());
  }
#endif
  static absl::string_view NameOf(absl::string_view name) { return name; }
  static absl::string_view NameOf(const iterator& at) { return at->first; }

  // Hash and equality over a name, whether given as one or as the
  // iterator of the node that holds it (heterogeneous lookup).
  struct NameHash {
    using is_transparent = void;
    template <typename Key>
    size_t operator()(const Key& key) const {
      return absl::Hash<absl::string_view>{}(NameOf(key));
    }
  };
  struct NameEq {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return NameOf(a) == NameOf(b);
    }
  };

  Ordered ordered_;
  absl::flat_hash_set<iterator, NameHash, NameEq> index_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_REGISTRY_LATEST_BY_NAME_H_
