#include "tests/cluster/register_checker.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"

namespace tensord::testing {

std::string Describe(const Operation& operation) {
  const char* kind = operation.kind == Operation::Kind::kPut      ? "put"
                     : operation.kind == Operation::Kind::kDelete ? "delete"
                                                                  : "read";
  std::string what;
  switch (operation.outcome) {
    case Operation::Outcome::kOk:
      what = operation.kind == Operation::Kind::kDelete ? "ok" : absl::StrCat("v", operation.value);
      if (operation.kind == Operation::Kind::kPut) what = absl::StrCat("v", operation.value, " ok");
      break;
    case Operation::Outcome::kNotFound: what = "not found"; break;
    case Operation::Outcome::kUnknown:
      what = operation.kind == Operation::Kind::kPut
                 ? absl::StrCat("v", operation.value, " unknown")
                 : "unknown";
      break;
  }
  const std::string returned = operation.returned == std::numeric_limits<int64_t>::max()
                                   ? "?"
                                   : absl::StrCat(operation.returned / 1000);
  return absl::StrCat("[", operation.called / 1000, "us..", returned, "us] client ",
                      operation.client, " on ", operation.node, ": ", kind, " '", operation.name,
                      "' -> ", what,
                      operation.detail.empty() ? "" : absl::StrCat(" (", operation.detail, ")"));
}

namespace {

// One end of an operation, in a doubly linked list ordered by time.
struct Entry {
  int op = -1;  // -1: the list's head
  bool call = false;
  int64_t time = 0;
  int match = -1;  // the other end
  int prev = -1;
  int next = -1;
};

// Whether `op` may take effect in `state`, and the state after it.
bool Step(const Operation& op, uint64_t state, uint64_t& after) {
  switch (op.kind) {
    case Operation::Kind::kPut: after = op.value; return true;
    case Operation::Kind::kDelete:
      after = kAbsent;
      if (op.outcome == Operation::Outcome::kOk) return state != kAbsent;
      if (op.outcome == Operation::Outcome::kNotFound) return state == kAbsent;
      return true;  // unknown
    case Operation::Kind::kRead:
      after = state;
      if (op.outcome == Operation::Outcome::kOk) return state == op.value;
      return state == kAbsent;
  }
  return false;
}

struct StateKey {
  std::vector<uint64_t> linearized;
  uint64_t value;
  bool operator==(const StateKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H hash, const StateKey& key) {
    return H::combine(std::move(hash), key.linearized, key.value);
  }
};

}  // namespace

CheckResult CheckRegister(std::vector<Operation> operations, uint64_t max_states) {
  CheckResult result;
  const int count = static_cast<int>(operations.size());
  if (count == 0) return result;
  std::sort(operations.begin(), operations.end(),
            [](const Operation& a, const Operation& b) { return a.called < b.called; });
  // Entries: 0 is the head; then each op's call and return, by time (calls
  // first at equal times, so touching operations count as concurrent).
  std::vector<Entry> entries(1);
  std::vector<int> order;
  for (int i = 0; i < count; ++i) {
    const Operation& op = operations[i];
    const int64_t returned = op.outcome == Operation::Outcome::kUnknown
                                 ? std::numeric_limits<int64_t>::max()
                                 : op.returned;
    entries.push_back(Entry{.op = i, .call = true, .time = op.called});
    entries.push_back(Entry{.op = i, .call = false, .time = returned});
    entries[entries.size() - 2].match = static_cast<int>(entries.size() - 1);
    entries.back().match = static_cast<int>(entries.size() - 2);
  }
  for (int i = 1; i < static_cast<int>(entries.size()); ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (entries[a].time != entries[b].time) return entries[a].time < entries[b].time;
    return entries[a].call && !entries[b].call;
  });
  int previous = 0;
  for (int index : order) {
    entries[previous].next = index;
    entries[index].prev = previous;
    previous = index;
  }
  entries[previous].next = -1;

  auto lift = [&](int call) {
    Entry& c = entries[call];
    entries[c.prev].next = c.next;
    if (c.next >= 0) entries[c.next].prev = c.prev;
    Entry& r = entries[c.match];
    entries[r.prev].next = r.next;
    if (r.next >= 0) entries[r.next].prev = r.prev;
  };
  auto unlift = [&](int call) {
    Entry& c = entries[call];
    Entry& r = entries[c.match];
    entries[r.prev].next = c.match;
    if (r.next >= 0) entries[r.next].prev = c.match;
    entries[c.prev].next = call;
    if (c.next >= 0) entries[c.next].prev = call;
  };

  std::vector<uint64_t> linearized((count + 63) / 64, 0);
  absl::flat_hash_set<StateKey> seen;
  struct Frame {
    int call;
    uint64_t state;
  };
  std::vector<Frame> stack;
  uint64_t state = kAbsent;
  int entry = entries[0].next;
  // For the report: the most operations placed, and the one that then
  // could not be.
  size_t deepest = 0;
  int stuck_op = -1;
  while (entries[0].next >= 0) {
    if (entry < 0) break;  // unreachable: a return always comes first
    const Entry& current = entries[entry];
    if (current.call) {
      const Operation& op = operations[current.op];
      uint64_t after = 0;
      if (Step(op, state, after)) {
        linearized[current.op / 64] |= uint64_t{1} << (current.op % 64);
        if (seen.insert(StateKey{linearized, after}).second) {
          if (++result.states > max_states) {
            result.undecided = true;
            result.linearizable = false;
            result.explanation = absl::StrCat("gave up after ", max_states, " states");
            return result;
          }
          stack.push_back(Frame{entry, state});
          state = after;
          lift(entry);
          entry = entries[0].next;
          continue;
        }
        linearized[current.op / 64] &= ~(uint64_t{1} << (current.op % 64));
      }
      entry = current.next;
      continue;
    }
    // A return: its operation must be placed before anything after it.
    if (operations[current.op].outcome == Operation::Outcome::kUnknown) {
      return result;  // only unknown operations remain: they may never have happened
    }
    if (stack.size() >= deepest) {
      deepest = stack.size();
      stuck_op = current.op;
    }
    if (stack.empty()) break;
    const Frame frame = stack.back();
    stack.pop_back();
    state = frame.state;
    const int op = entries[frame.call].op;
    linearized[op / 64] &= ~(uint64_t{1} << (op % 64));
    unlift(frame.call);
    entry = entries[frame.call].next;
  }
  if (entries[0].next < 0) return result;  // everything placed
  result.linearizable = false;
  if (stuck_op >= 0) {
    const Operation& stuck = operations[stuck_op];
    std::string around;
    for (const Operation& op : operations) {
      // What overlaps the stuck operation, and what came shortly before.
      const int64_t returned = op.returned;
      if (op.called <= stuck.returned && returned >= stuck.called - 2'000'000'000) {
        absl::StrAppend(&around, "\n    ", Describe(op));
      }
    }
    result.explanation = absl::StrCat("no order explains ", Describe(stuck), " after ", deepest,
                                      " operations were placed; around it:", around);
  }
  return result;
}

}  // namespace tensord::testing
