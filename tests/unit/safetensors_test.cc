#include "service/formats/safetensors.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "service/dlpack/data_type.h"

namespace tensord::formats {
namespace {

using ::testing::HasSubstr;
using dlpack::operator==;

// A file: the little-endian length of `header`, `header`, then `data_bytes`
// bytes of data.
std::string FileWith(const std::string& header, size_t data_bytes) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(uint64_t{header.size()} >> (8 * i)));
  out += header;
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<char>(i));
  return out;
}

// One tensor entry of a header.
std::string Entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

std::string ErrorOf(const std::string& file) {
  absl::StatusOr<SafetensorsIndex> index = ParseSafetensors(file);
  EXPECT_FALSE(index.ok()) << "parsed unexpectedly";
  if (index.ok()) return "";
  EXPECT_EQ(index.status().code(), absl::StatusCode::kInvalidArgument) << index.status();
  return std::string(index.status().message());
}

TEST(SafetensorsTest, ParsesAMultiTensorFile) {
  // Written out of offset order; padded with spaces as the reference writer does.
  std::string header = "{" + Entry("b", "BF16", "[3]", "[16,22]") + "," +
                       "\"__metadata__\":{\"format\":\"pt\",\"step\":\"7\"}," +
                       Entry("a", "F32", "[2,2]", "[0,16]") + "," +
                       Entry("scalar", "BOOL", "[]", "[22,23]") + "," +
                       Entry("empty", "F8_E4M3", "[0,4]", "[23,23]") + "," +
                       Entry("tail", "I64", "[1]", "[24,32]") + "}     ";
  std::string file = FileWith(header, 32);
  absl::StatusOr<SafetensorsIndex> index = ParseSafetensors(file);
  ASSERT_TRUE(index.ok()) << index.status();

  const uint64_t base = 8 + header.size();
  ASSERT_EQ(index->entries.size(), 5u);
  std::vector<std::string> names;
  for (const SafetensorsEntry& e : index->entries) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "scalar", "empty", "tail"}));

  const SafetensorsEntry& a = index->entries[0];
  EXPECT_TRUE(a.layout.dtype == (DLDataType{dlpack::kFloat, 32, 1}));
  EXPECT_EQ(a.layout.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(a.layout.strides.empty());
  EXPECT_EQ(a.begin, base);
  EXPECT_EQ(a.end, base + 16);

  const SafetensorsEntry& b = index->entries[1];
  EXPECT_TRUE(b.layout.dtype == (DLDataType{dlpack::kBfloat, 16, 1}));
  EXPECT_EQ(b.begin, base + 16);
  EXPECT_EQ(b.end, base + 22);

  EXPECT_TRUE(index->entries[2].layout.dtype == (DLDataType{dlpack::kBool, 8, 1}));
  EXPECT_TRUE(index->entries[2].layout.shape.empty());
  EXPECT_TRUE(index->entries[3].layout.dtype == (DLDataType{dlpack::kFloat8_e4m3fn, 8, 1}));
  EXPECT_EQ(index->entries[3].begin, index->entries[3].end);
  EXPECT_EQ(index->entries[4].end, file.size());  // a gap before it is allowed

  EXPECT_EQ(index->metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"step", "7"}}));
}

TEST(SafetensorsTest, MapsEveryDtype) {
  const std::vector<std::pair<std::string, DLDataType>> dtypes = {
      {"BOOL", {dlpack::kBool, 8, 1}},
      {"U8", {dlpack::kUInt, 8, 1}},
      {"I8", {dlpack::kInt, 8, 1}},
      {"U16", {dlpack::kUInt, 16, 1}},
      {"I16", {dlpack::kInt, 16, 1}},
      {"U32", {dlpack::kUInt, 32, 1}},
      {"I32", {dlpack::kInt, 32, 1}},
      {"U64", {dlpack::kUInt, 64, 1}},
      {"I64", {dlpack::kInt, 64, 1}},
      {"F16", {dlpack::kFloat, 16, 1}},
      {"BF16", {dlpack::kBfloat, 16, 1}},
      {"F32", {dlpack::kFloat, 32, 1}},
      {"F64", {dlpack::kFloat, 64, 1}},
      {"C64", {dlpack::kComplex, 64, 1}},
      {"F8_E4M3", {dlpack::kFloat8_e4m3fn, 8, 1}},
      {"F8_E5M2", {dlpack::kFloat8_e5m2, 8, 1}},
  };
  for (const auto& [name, dtype] : dtypes) {
    const size_t bytes = 3u * dtype.bits / 8;
    std::string header = "{" + Entry("t", name, "[3]", "[0," + std::to_string(bytes) + "]") + "}";
    absl::StatusOr<SafetensorsIndex> index = ParseSafetensors(FileWith(header, bytes));
    ASSERT_TRUE(index.ok()) << name << ": " << index.status();
    ASSERT_EQ(index->entries.size(), 1u);
    EXPECT_TRUE(index->entries[0].layout.dtype == dtype) << name;
  }
}

TEST(SafetensorsTest, EmptyHeaderAndNullMetadata) {
  absl::StatusOr<SafetensorsIndex> index = ParseSafetensors(FileWith("{}", 0));
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_TRUE(index->entries.empty());
  index = ParseSafetensors(FileWith("{\"__metadata__\":null}", 0));
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_TRUE(index->metadata.empty());
}

TEST(SafetensorsTest, RejectsBadHeaderLengths) {
  EXPECT_THAT(ErrorOf(""), HasSubstr("no 8-byte header length"));
  EXPECT_THAT(ErrorOf(std::string("\x02\0\0\0\0\0\0", 7)), HasSubstr("no 8-byte header length"));
  std::string file = FileWith("{}", 0);
  file[0] = 3;
  EXPECT_THAT(ErrorOf(file), HasSubstr("header length 3 runs past the end of the 10-byte file"));
  file = std::string("\x00\xe2\xf5\x05\0\0\0\0{}", 10);  // 100'000'256
  EXPECT_THAT(ErrorOf(file), HasSubstr("exceeds the limit"));
  file = std::string("\xff\xff\xff\xff\xff\xff\xff\xff{}", 10);
  EXPECT_THAT(ErrorOf(file), HasSubstr("exceeds the limit"));
}

TEST(SafetensorsTest, RejectsBadJson) {
  EXPECT_THAT(ErrorOf(FileWith("{\"a\":", 0)), HasSubstr("not valid JSON"));
  EXPECT_THAT(ErrorOf(FileWith("", 0)), HasSubstr("not valid JSON"));
  EXPECT_THAT(ErrorOf(FileWith("{} {}", 0)), HasSubstr("not valid JSON"));
  EXPECT_THAT(ErrorOf(FileWith("{\"\xff\":1}", 0)), HasSubstr("not valid JSON"));
  EXPECT_THAT(ErrorOf(FileWith("[1,2]", 0)), HasSubstr("not a JSON object"));
  EXPECT_THAT(ErrorOf(FileWith("\"x\"", 0)), HasSubstr("not a JSON object"));
}

TEST(SafetensorsTest, RejectsBadEntries) {
  struct Case {
    std::string entry;
    std::string error;
  };
  const std::vector<Case> cases = {
      {Entry("w", "F8_E8M0", "[2]", "[0,2]"), "unsupported dtype 'F8_E8M0'"},
      {Entry("w", "f32", "[2]", "[0,8]"), "unsupported dtype 'f32'"},
      {"\"w\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}", "is not a string"},
      {Entry("w", "F32", "[-1]", "[0,8]"), "has extent -1"},
      {Entry("w", "F32", "[2.0]", "[0,8]"), "has extent 2.0"},
      {Entry("w", "F32", "[\"2\"]", "[0,8]"), "has extent \"2\""},
      {Entry("w", "F32", "[18446744073709551615]", "[0,8]"), "has extent"},
      {Entry("w", "F32", "[4294967296,4294967296,4294967296]", "[0,8]"), "shape ["},
      {Entry("w", "F32", "{}", "[0,8]"), "is not an array"},
      {Entry("w", "F32", "[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]",
             "[0,4]"),
       "more than 32"},
      {Entry("w", "F32", "[2]", "[0,4]"), "span 4 bytes but F32 shape [2] needs 8"},
      {Entry("w", "F32", "[2]", "[8,0]"), "0 <= begin <= end"},
      {Entry("w", "F32", "[2]", "[0]"), "is not [begin, end]"},
      {Entry("w", "F32", "[2]", "[0,8,16]"), "is not [begin, end]"},
      {Entry("w", "F32", "[2]", "[-8,0]"), "is not [begin, end]"},
      {Entry("w", "F32", "[2]", "\"0-8\""), "is not [begin, end]"},
      {Entry("w", "F32", "[8]", "[0,32]"), "run past the end of the 16-byte data section"},
      {Entry("w", "F32", "[2]", "[18446744073709551608,18446744073709551615]"), "run past the end"},
      {"\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}", "needs 'dtype', 'shape' and 'data_offsets'"},
      {"\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}", "needs 'dtype'"},
      {"\"w\":{\"dtype\":\"F32\",\"shape\":[2]}", "needs 'dtype'"},
      {"\"w\":[1,2]", "entry is not a JSON object"},
  };
  for (const Case& c : cases) {
    std::string message = ErrorOf(FileWith("{" + c.entry + "}", 16));
    EXPECT_THAT(message, HasSubstr(c.error)) << c.entry;
    EXPECT_THAT(message, HasSubstr("tensor 'w'")) << c.entry;
  }
}

TEST(SafetensorsTest, RejectsOverlapsAndDuplicates) {
  std::string overlap =
      "{" + Entry("a", "F32", "[2]", "[0,8]") + "," + Entry("b", "F32", "[2]", "[4,12]") + "}";
  std::string message = ErrorOf(FileWith(overlap, 16));
  EXPECT_THAT(message, HasSubstr("tensor 'b'"));
  EXPECT_THAT(message, HasSubstr("overlap tensor 'a' at [0, 8)"));

  std::string same =
      "{" + Entry("a", "F32", "[2]", "[0,8]") + "," + Entry("b", "I32", "[2]", "[0,8]") + "}";
  EXPECT_THAT(ErrorOf(FileWith(same, 16)), HasSubstr("overlap"));

  // An empty tensor may sit at either end of another, but not inside it.
  std::string edges = "{" + Entry("a", "F32", "[2]", "[0,8]") + "," +
                      Entry("e0", "F32", "[0]", "[0,0]") + "," +
                      Entry("e8", "F32", "[0]", "[8,8]") + "}";
  EXPECT_TRUE(ParseSafetensors(FileWith(edges, 8)).ok());
  std::string inside =
      "{" + Entry("a", "F32", "[2]", "[0,8]") + "," + Entry("e4", "F32", "[0]", "[4,4]") + "}";
  EXPECT_THAT(ErrorOf(FileWith(inside, 8)), HasSubstr("tensor 'e4'"));

  std::string twice =
      "{" + Entry("a", "F32", "[2]", "[0,8]") + "," + Entry("a", "F32", "[2]", "[8,16]") + "}";
  EXPECT_THAT(ErrorOf(FileWith(twice, 16)), HasSubstr("tensor 'a': name appears more than once"));
  // Nested objects may repeat top-level names; only tensor names must be unique.
  std::string nested = "{\"__metadata__\":{\"a\":\"x\"}," + Entry("a", "F32", "[2]", "[0,8]") + "}";
  EXPECT_TRUE(ParseSafetensors(FileWith(nested, 8)).ok());
}

TEST(SafetensorsTest, RejectsBadMetadata) {
  EXPECT_THAT(ErrorOf(FileWith("{\"__metadata__\":{\"k\":1}}", 0)),
              HasSubstr("__metadata__ key 'k' has non-string value 1"));
  EXPECT_THAT(ErrorOf(FileWith("{\"__metadata__\":[\"k\"]}", 0)),
              HasSubstr("__metadata__ [\"k\"] is not an object"));
}

TEST(SafetensorsTest, EveryTruncationIsRefused) {
  std::string header = "{" + Entry("a", "F32", "[2,2]", "[0,16]") + "}";
  std::string file = FileWith(header, 16);
  ASSERT_TRUE(ParseSafetensors(file).ok());
  for (size_t n = 0; n < file.size(); ++n) {
    EXPECT_FALSE(ParseSafetensors(file.substr(0, n)).ok()) << "cut at " << n;
  }
}

}  // namespace
}  // namespace tensord::formats

namespace tensord::formats {
namespace {

// Checkpoints and KV dumps hold 10^4..10^6 tensors: the header is read in
// linear passes (the nlohmann callback parser used before rescanned the
// object at each entry and took 52 s for 100,000 entries).
TEST(SafetensorsTest, AHeaderOfAHundredThousandTensorsParsesAndStillRefusesDuplicates) {
  constexpr int kTensors = 100'000;
  std::string header = "{";
  for (int i = 0; i < kTensors; ++i) {
    if (i > 0) header += ",";
    header += Entry("t/" + std::to_string(i), "U8", "[4]",
                    "[" + std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]");
  }
  absl::StatusOr<SafetensorsIndex> index = ParseSafetensors(FileWith(header + "}", 4 * kTensors));
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ(index->entries.size(), static_cast<size_t>(kTensors));
  EXPECT_EQ(index->entries.back().name, "t/" + std::to_string(kTensors - 1));
  const std::string twice = header + "," + Entry("t/7", "U8", "[0]", "[0,0]") + "}";
  EXPECT_THAT(ErrorOf(FileWith(twice, 4 * kTensors)),
              HasSubstr("tensor 't/7': name appears more than once"));
}

}  // namespace
}  // namespace tensord::formats
