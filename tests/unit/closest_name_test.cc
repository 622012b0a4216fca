#include "service/common/closest_name.h"

#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace tensord {
namespace {

TEST(EditDistanceTest, CountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("max_host_bytes", "max_host_byte"), 1u);
  EXPECT_EQ(EditDistance("flaw", "lawn"), 2u);
  EXPECT_EQ(EditDistance("gte", "get"), 1u);  // a swap of neighbours
  EXPECT_EQ(EditDistance("outptu", "output"), 1u);
}

TEST(ClosestNameTest, SuggestsTheNearestSlipAndNothingFarAway) {
  const std::vector<std::string_view> flags = {"max_host_bytes", "max_tensor_bytes", "max_tensors",
                                               "listen", "log_level"};
  EXPECT_EQ(ClosestName("max_host_byte", flags), "max_host_bytes");
  EXPECT_EQ(ClosestName("max_tensor", flags), "max_tensors");  // an abbreviation
  EXPECT_EQ(ClosestName("lisen", flags), "listen");
  EXPECT_EQ(ClosestName("loglevel", flags), "log_level");
  EXPECT_EQ(ClosestName("verbose", flags), std::nullopt);
  EXPECT_EQ(ClosestName("", flags), std::nullopt);
  EXPECT_EQ(ClosestName("x", std::vector<std::string_view>{}), std::nullopt);
}

TEST(ClosestNameTest, PrefersTheSmallerDistance) {
  const std::vector<std::string_view> commands = {"get", "put", "ls", "stat", "rm"};
  EXPECT_EQ(ClosestName("gte", commands), "get");
  EXPECT_EQ(ClosestName("pt", commands), "put");
  EXPECT_EQ(ClosestName("stats", commands), "stat");
}

}  // namespace
}  // namespace tensord
