// Decides whether a history of operations on one name is linearizable as a
// register whose writes are unique values (Wing & Gong's search with Lowe's
// memoisation: an operation may take effect at one instant between its
// call and its return; find an order of those instants that explains every
// answer). Puts and deletes with unknown outcomes may take effect at any
// time after their call, or never.
#ifndef TENSORD_TESTS_CLUSTER_REGISTER_CHECKER_H_
#define TENSORD_TESTS_CLUSTER_REGISTER_CHECKER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tests/cluster/history.h"

namespace tensord::testing {

struct CheckResult {
  bool linearizable = true;
  // The search gave up (more states than `max_states`): neither verdict.
  bool undecided = false;
  uint64_t states = 0;  // states explored
  // When not linearizable: the operations around the first one no order
  // could place, for the report.
  std::string explanation;
};

// `operations` are of one name, in any order. Reads that failed must not
// be given (they say nothing).
CheckResult CheckRegister(std::vector<Operation> operations, uint64_t max_states = 20'000'000);

}  // namespace tensord::testing

#endif  // TENSORD_TESTS_CLUSTER_REGISTER_CHECKER_H_
