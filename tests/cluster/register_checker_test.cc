// The checker must say "linearizable" exactly when an order exists: known
// good and bad histories, and random histories of a real register (always
// good) with one stale read slipped in (always bad).
#include "tests/cluster/register_checker.h"

#include <random>

#include "gtest/gtest.h"

namespace tensord::testing {
namespace {

Operation Put(uint64_t value, int64_t called, int64_t returned) {
  return Operation{.kind = Operation::Kind::kPut,
                   .name = "x",
                   .value = value,
                   .called = called,
                   .returned = returned};
}
Operation Read(uint64_t value, int64_t called, int64_t returned) {
  return Operation{
      .kind = Operation::Kind::kRead,
      .outcome = value == kAbsent ? Operation::Outcome::kNotFound : Operation::Outcome::kOk,
      .name = "x",
      .value = value,
      .called = called,
      .returned = returned};
}
Operation Delete(bool found, int64_t called, int64_t returned) {
  return Operation{.kind = Operation::Kind::kDelete,
                   .outcome = found ? Operation::Outcome::kOk : Operation::Outcome::kNotFound,
                   .name = "x",
                   .called = called,
                   .returned = returned};
}
Operation Unknown(Operation op) {
  op.outcome = Operation::Outcome::kUnknown;
  return op;
}

TEST(RegisterCheckerTest, SequentialHistoriesOfARegisterAreLinearizable) {
  EXPECT_TRUE(
      CheckRegister({Read(kAbsent, 0, 1), Put(1, 2, 3), Read(1, 4, 5), Put(2, 6, 7), Read(2, 8, 9),
                     Delete(true, 10, 11), Read(kAbsent, 12, 13), Delete(false, 14, 15)})
          .linearizable);
}

TEST(RegisterCheckerTest, AnOverwrittenValueReadAfterTheNewerPutReturnedIsCaught) {
  const CheckResult result = CheckRegister({Put(1, 0, 10), Put(2, 20, 30), Read(1, 40, 50)});
  EXPECT_FALSE(result.linearizable);
  EXPECT_FALSE(result.undecided);
  EXPECT_NE(result.explanation.find("read 'x' -> v1"), std::string::npos) << result.explanation;
}

TEST(RegisterCheckerTest, AReadConcurrentWithAPutMaySeeEitherValue) {
  EXPECT_TRUE(CheckRegister({Put(1, 0, 10), Put(2, 20, 30), Read(1, 25, 35)}).linearizable);
  EXPECT_TRUE(CheckRegister({Put(1, 0, 10), Put(2, 20, 30), Read(2, 25, 35)}).linearizable);
  // But once a read saw the new value, a later read cannot see the old one.
  EXPECT_FALSE(CheckRegister({Put(1, 0, 10), Put(2, 20, 60), Read(2, 25, 35), Read(1, 40, 50)})
                   .linearizable);
}

TEST(RegisterCheckerTest, ADeleteIsNeverUndone) {
  EXPECT_FALSE(CheckRegister({Put(1, 0, 10), Delete(true, 20, 30), Read(1, 40, 50)}).linearizable);
  // A delete that found nothing while a value was there is wrong too.
  EXPECT_FALSE(CheckRegister({Put(1, 0, 10), Delete(false, 20, 30)}).linearizable);
}

TEST(RegisterCheckerTest, UnknownWritesMayHappenLateOrNever) {
  // Observed long after its call: it happened in between.
  EXPECT_TRUE(CheckRegister({Unknown(Put(1, 0, 10)), Read(kAbsent, 20, 30), Read(1, 100, 110)})
                  .linearizable);
  // Never observed: it never happened.
  EXPECT_TRUE(
      CheckRegister({Put(1, 0, 10), Unknown(Put(2, 20, 30)), Read(1, 40, 50)}).linearizable);
  // But not before it was called.
  EXPECT_FALSE(CheckRegister({Read(1, 0, 10), Unknown(Put(1, 20, 30))}).linearizable);
  // And once seen it stays until overwritten.
  EXPECT_FALSE(
      CheckRegister({Put(1, 0, 10), Unknown(Put(2, 20, 30)), Read(2, 40, 50), Read(1, 60, 70)})
          .linearizable);
}

TEST(RegisterCheckerTest, AValueNobodyWroteIsCaught) {
  EXPECT_FALSE(CheckRegister({Put(1, 0, 10), Read(7, 20, 30)}).linearizable);
}

// A register run by a "server" that applies each operation at a random
// instant inside its window gives a linearizable history; replacing one
// read's answer by a value overwritten before the read began does not.
TEST(RegisterCheckerTest, RandomRegisterHistoriesAreJudgedRight) {
  std::mt19937_64 random(12345);
  int injected = 0;
  for (int round = 0; round < 30; ++round) {
    struct Planned {
      Operation op;
      int64_t effect;
    };
    std::vector<Planned> planned;
    uint64_t next_value = 1;
    int64_t now = 0;
    for (int i = 0; i < 200; ++i) {
      const int64_t called = now + static_cast<int64_t>(random() % 50);
      const int64_t length = 1 + static_cast<int64_t>(random() % 200);
      const int64_t effect = called + static_cast<int64_t>(random() % length);
      const int kind = static_cast<int>(random() % 10);
      Operation op;
      op.name = "x";
      op.client = i % 6;
      op.called = called;
      op.returned = called + length;
      op.kind = kind < 4   ? Operation::Kind::kPut
                : kind < 5 ? Operation::Kind::kDelete
                           : Operation::Kind::kRead;
      if (op.kind == Operation::Kind::kPut) op.value = next_value++;
      planned.push_back({op, effect});
      now += static_cast<int64_t>(random() % 30);
    }
    // Apply in effect order; answers follow the register's state.
    std::vector<size_t> order(planned.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return planned[a].effect < planned[b].effect; });
    uint64_t state = kAbsent;
    std::vector<std::pair<int64_t, uint64_t>> overwritten;  // (when, value) of replaced values
    for (size_t index : order) {
      Operation& op = planned[index].op;
      switch (op.kind) {
        case Operation::Kind::kPut:
          if (state != kAbsent) overwritten.emplace_back(planned[index].effect, state);
          state = op.value;
          break;
        case Operation::Kind::kDelete:
          op.outcome = state == kAbsent ? Operation::Outcome::kNotFound : Operation::Outcome::kOk;
          if (state != kAbsent) overwritten.emplace_back(planned[index].effect, state);
          state = kAbsent;
          break;
        case Operation::Kind::kRead:
          op.value = state;
          op.outcome = state == kAbsent ? Operation::Outcome::kNotFound : Operation::Outcome::kOk;
          break;
      }
    }
    std::vector<Operation> history;
    for (const Planned& p : planned) history.push_back(p.op);
    const CheckResult good = CheckRegister(history);
    ASSERT_TRUE(good.linearizable) << "round " << round << ": " << good.explanation;
    // A read that starts after a value was overwritten, answering it.
    for (Operation& op : history) {
      if (op.kind != Operation::Kind::kRead) continue;
      auto stale = std::find_if(overwritten.begin(), overwritten.end(), [&](const auto& o) {
        // Overwritten well before the read began, and not the read's answer.
        return o.first + 400 < op.called && o.second != op.value;
      });
      if (stale == overwritten.end()) continue;
      op.value = stale->second;
      op.outcome = Operation::Outcome::kOk;
      const CheckResult bad = CheckRegister(history);
      EXPECT_FALSE(bad.linearizable) << "round " << round;
      EXPECT_FALSE(bad.undecided);
      ++injected;
      break;
    }
  }
  EXPECT_GE(injected, 25) << "too few histories had a stale read to slip in";
}

}  // namespace
}  // namespace tensord::testing
