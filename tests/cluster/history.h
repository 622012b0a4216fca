// What the consistency check records: every operation a client made on a
// name, with when it was called and when it returned (the client's clock),
// and what came back. The checker (register_checker.h) decides from these
// alone whether the cluster behaved as one register per name.
#ifndef TENSORD_TESTS_CLUSTER_HISTORY_H_
#define TENSORD_TESTS_CLUSTER_HISTORY_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>
#include "service/common/mutex.h"

namespace tensord::testing {

// The value of an absent name; written values are 1 and up, each unique.
inline constexpr uint64_t kAbsent = 0;

struct Operation {
  enum class Kind { kPut, kDelete, kRead };
  enum class Outcome {
    kOk,        // put: acknowledged; delete: removed something; read: `value`
    kNotFound,  // delete or read: nothing was there (kAbsent)
    kUnknown,   // put or delete that failed in a way that may have taken effect
  };
  Kind kind = Kind::kRead;
  Outcome outcome = Outcome::kOk;
  std::string name;
  // Put: the value written. Read (kOk): the value read.
  uint64_t value = kAbsent;
  // The client's clock, nanoseconds. An unknown outcome never returned for
  // the checker: it may take effect at any time after its call.
  int64_t called = 0;
  int64_t returned = std::numeric_limits<int64_t>::max();
  int client = 0;
  // Copies the put asked for (the survival check).
  uint32_t replicas = 1;
  std::string node;    // the node the client called
  std::string detail;  // the status, for reports
};

// Thread-safe.
class History {
 public:
  void Add(Operation operation) {
    MutexLock lock(&mu_);
    operations_.push_back(std::move(operation));
  }
  std::vector<Operation> Take() {
    MutexLock lock(&mu_);
    return std::move(operations_);
  }

 private:
  Mutex mu_;
  std::vector<Operation> operations_ ABSL_GUARDED_BY(mu_);
};

std::string Describe(const Operation& operation);

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_CLUSTER_HISTORY_H_
