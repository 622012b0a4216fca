#include "service/registry/latest_by_name.h"

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace tensord {
namespace {

// Finds, erasures and ordered walks agree with a plain std::map through a
// sequence of inserts, overwrites and erasures (the index must follow each
// erase, or a find would return a freed node).
TEST(LatestByNameTest, AgreesWithAnOrderedMapThroughInsertsAndErasures) {
  LatestByName<int> latest;
  std::map<std::string, int, std::less<>> expected;
  constexpr int kNames = 5000;
  for (int i = 0; i < kNames; ++i) {
    const std::string name = absl::StrCat("layer/", i % 97, "/block/", i);
    ASSERT_TRUE(latest.emplace(name, i).second);
    expected.emplace(name, i);
  }
  // A name already present is not replaced by emplace; its value is
  // changed through the iterator, as the registry does.
  const std::string first = absl::StrCat("layer/", 0, "/block/", 0);
  EXPECT_FALSE(latest.emplace(first, -1).second);
  EXPECT_EQ(latest.find(first)->second, 0);
  latest.find(first)->second = 42;
  expected[first] = 42;
  // Every third name erased, through find as Delete does.
  for (int i = 0; i < kNames; i += 3) {
    const std::string name = absl::StrCat("layer/", i % 97, "/block/", i);
    auto at = latest.find(absl::string_view(name));
    ASSERT_NE(at, latest.end()) << name;
    latest.erase(at);
    expected.erase(name);
  }
  ASSERT_EQ(latest.size(), expected.size());
  for (int i = 0; i < kNames; ++i) {
    const std::string name = absl::StrCat("layer/", i % 97, "/block/", i);
    const bool present = expected.contains(name);
    EXPECT_EQ(latest.contains(name), present) << name;
    EXPECT_EQ(latest.contains(std::string_view(name)), present) << name;
    auto found = latest.find(name);
    ASSERT_EQ(found != latest.end(), present) << name;
    if (present) {
      EXPECT_EQ(found->first, name);
      EXPECT_EQ(found->second, expected[name]);
    }
  }
  std::vector<std::string> walked;
  for (const auto& [name, value] : latest) walked.push_back(name);
  std::vector<std::string> ordered;
  for (const auto& [name, value] : expected) ordered.push_back(name);
  EXPECT_EQ(walked, ordered);
  // A prefix walk from lower_bound sees that prefix's names in order.
  const std::string prefix = "layer/5/";
  std::vector<std::string> prefixed;
  for (auto it = latest.lower_bound(prefix);
       it != latest.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    prefixed.push_back(it->first);
  }
  std::vector<std::string> expected_prefixed;
  for (auto it = expected.lower_bound(prefix);
       it != expected.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    expected_prefixed.push_back(it->first);
  }
  EXPECT_EQ(prefixed, expected_prefixed);
  EXPECT_FALSE(prefixed.empty());
}

// A name erased and added again is found again, with its new value; a
// name never added is not found, nor a prefix of a present name.
TEST(LatestByNameTest, FindsOnlyWholeNamesAndNamesAddedAgain) {
  LatestByName<int> latest;
  latest.emplace("a/b", 1);
  EXPECT_EQ(latest.find("a/"), latest.end());
  EXPECT_EQ(latest.find("a/bc"), latest.end());
  EXPECT_FALSE(latest.contains(""));
  latest.erase(latest.find("a/b"));
  EXPECT_TRUE(latest.empty());
  EXPECT_FALSE(latest.contains("a/b"));
  latest.emplace("a/b", 2);
  ASSERT_NE(latest.find("a/b"), latest.end());
  EXPECT_EQ(latest.find("a/b")->second, 2);
  const LatestByName<int>& constant = latest;
  EXPECT_EQ(constant.find("a/b")->second, 2);
  EXPECT_EQ(constant.upper_bound("a/b"), constant.end());
}

}  // namespace
}  // namespace tensord
