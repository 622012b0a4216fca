#include "service/formats/npy.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "service/common/mapped_file.h"
#include "service/dlpack/data_type.h"

namespace tensord::formats {
namespace {

using ::testing::HasSubstr;
using dlpack::operator==;

constexpr DLDataType kF32{dlpack::kFloat, 32, 1};

// A file from a raw dict: the v1.0 preamble, the dict, then `data_bytes` zeros.
std::string NpyWithDict(std::string dict, size_t data_bytes = 0, int major = 1) {
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  const size_t n = dict.size();
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out.push_back(static_cast<char>(n >> (8 * i)));
  out += dict;
  out.append(data_bytes, '\0');
  return out;
}

std::string ErrorOf(std::string_view file, bool complete = true) {
  absl::StatusOr<NpyHeader> h = ParseNpyHeader(file, complete);
  EXPECT_FALSE(h.ok()) << "parsed unexpectedly";
  if (h.ok()) return "";
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << h.status();
  return std::string(h.status().message());
}

TEST(NpyTest, EncodesTheBytesNumpyWrites) {
  const int64_t shape[] = {2, 3};
  absl::StatusOr<std::string> header = EncodeNpyHeader(kF32, shape);
  ASSERT_TRUE(header.ok()) << header.status();
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  std::string expected("\x93NUMPY\x01\x00\x76\x00", 10);  // dict length 118
  expected += dict + std::string(128 - 10 - dict.size() - 1, ' ') + "\n";
  EXPECT_EQ(*header, expected);
}

TEST(NpyTest, RoundTripsEveryDtypeAndShape) {
  const std::vector<DLDataType> dtypes = {
      {dlpack::kBool, 8, 1},     {dlpack::kInt, 8, 1},       {dlpack::kInt, 16, 1},
      {dlpack::kInt, 32, 1},     {dlpack::kInt, 64, 1},      {dlpack::kUInt, 8, 1},
      {dlpack::kUInt, 16, 1},    {dlpack::kUInt, 32, 1},     {dlpack::kUInt, 64, 1},
      {dlpack::kFloat, 16, 1},   {dlpack::kFloat, 32, 1},    {dlpack::kFloat, 64, 1},
      {dlpack::kComplex, 64, 1}, {dlpack::kComplex, 128, 1},
  };
  const std::vector<std::vector<int64_t>> shapes = {{}, {0}, {5}, {2, 0, 3}, {2, 3, 4}, {1, 1}};
  for (const DLDataType& dtype : dtypes) {
    for (const std::vector<int64_t>& shape : shapes) {
      SCOPED_TRACE(dlpack::DataTypeName(dtype) + " ndim " + std::to_string(shape.size()));
      absl::StatusOr<std::string> header = EncodeNpyHeader(dtype, shape);
      ASSERT_TRUE(header.ok()) << header.status();
      EXPECT_EQ(header->size() % 64, 0u);
      EXPECT_EQ(header->back(), '\n');
      uint64_t numel = 1;
      for (int64_t d : shape) numel *= static_cast<uint64_t>(d);
      const uint64_t bytes = numel * dtype.bits / 8;
      std::string file = *header + std::string(bytes, '\x5a');

      absl::StatusOr<NpyHeader> parsed = ParseNpyHeader(file);
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      EXPECT_TRUE(parsed->layout.dtype == dtype);
      EXPECT_EQ(parsed->layout.shape, shape);
      EXPECT_TRUE(parsed->layout.strides.empty());
      EXPECT_EQ(parsed->layout.byte_offset, 0u);
      EXPECT_EQ(parsed->data_offset, header->size());
      EXPECT_EQ(parsed->data_bytes, bytes);
    }
  }
}

TEST(NpyTest, FormatsShapeTuplesLikePython) {
  auto dict_of = [](std::vector<int64_t> shape) {
    std::string h = *EncodeNpyHeader(kF32, shape);
    return h.substr(10, h.find('}') - 10 + 1);
  };
  EXPECT_THAT(dict_of({}), HasSubstr("'shape': (), }"));
  EXPECT_THAT(dict_of({5}), HasSubstr("'shape': (5,), }"));
  EXPECT_THAT(dict_of({2, 3, 4}), HasSubstr("'shape': (2, 3, 4), }"));
  EXPECT_THAT(*EncodeNpyHeader({dlpack::kUInt, 8, 1}, std::vector<int64_t>{3}),
              HasSubstr("'descr': '|u1'"));
  EXPECT_THAT(*EncodeNpyHeader({dlpack::kBool, 8, 1}, std::vector<int64_t>{3}),
              HasSubstr("'descr': '|b1'"));
}

TEST(NpyTest, EncodeRejectsDtypesNpyCannotExpress) {
  const int64_t shape[] = {4};
  for (DLDataType dtype : std::vector<DLDataType>{{dlpack::kBfloat, 16, 1},
                                                  {dlpack::kFloat8_e4m3fn, 8, 1},
                                                  {dlpack::kInt, 4, 1},
                                                  {dlpack::kFloat, 32, 4},
                                                  {dlpack::kOpaqueHandle, 64, 1}}) {
    absl::StatusOr<std::string> h = EncodeNpyHeader(dtype, shape);
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << dlpack::DataTypeName(dtype);
  }
  const int64_t negative[] = {2, -1};
  EXPECT_FALSE(EncodeNpyHeader(kF32, negative).ok());
}

TEST(NpyTest, FortranOrderGetsColumnMajorStrides) {
  std::string file =
      NpyWithDict("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3, 4), }\n", 24 * 8);
  absl::StatusOr<NpyHeader> h = ParseNpyHeader(file);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->layout.shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(h->layout.strides, (std::vector<int64_t>{1, 2, 6}));
  EXPECT_EQ(h->data_bytes, 24u * 8);

  // Zero extents count as 1, as numpy does, so the strides stay meaningful.
  h = ParseNpyHeader(NpyWithDict("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 0, 5)}"));
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->layout.strides, (std::vector<int64_t>{1, 3, 3}));
}

TEST(NpyTest, DictSyntaxIsTolerant) {
  // Keys in any order, double quotes, extra whitespace, no trailing comma,
  // Python 2 long suffixes, versions 2.0 and 3.0.
  for (std::string dict : {
           "{\"shape\":(2,3),\"fortran_order\":False,\"descr\":\"<i4\"}",
           "  {  'fortran_order' : False ,\n 'shape' : ( 2 , 3 , ) , 'descr' : '=i4' , }  \n",
           "{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 3L), }",
           "{'descr': 'i4', 'fortran_order': False, 'shape': (2, 3)}",
       }) {
    SCOPED_TRACE(dict);
    for (int major : {1, 2, 3}) {
      absl::StatusOr<NpyHeader> h = ParseNpyHeader(NpyWithDict(dict, 24, major));
      ASSERT_TRUE(h.ok()) << h.status();
      EXPECT_TRUE(h->layout.dtype == (DLDataType{dlpack::kInt, 32, 1}));
      EXPECT_EQ(h->layout.shape, (std::vector<int64_t>{2, 3}));
      EXPECT_EQ(h->data_offset, dict.size() + (major == 1 ? 10u : 12u));
    }
  }
}

TEST(NpyTest, ByteOrder) {
  auto parse = [](std::string descr) {
    return ParseNpyHeader(
        NpyWithDict("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (1,), }", 16));
  };
  EXPECT_TRUE(parse("<f4").ok());
  EXPECT_TRUE(parse("=f4").ok());
  EXPECT_TRUE(parse("|u1").ok());
  EXPECT_TRUE(parse(">u1").ok());  // one byte: the order mark means nothing
  EXPECT_TRUE(parse(">b1").ok());
  EXPECT_TRUE(parse("<c16").ok());
  for (std::string be : {">f4", ">i2", ">u8", ">c8", ">f2"}) {
    absl::StatusOr<NpyHeader> h = parse(be);
    ASSERT_FALSE(h.ok()) << be;
    EXPECT_THAT(h.status().message(), HasSubstr("big-endian"));
    EXPECT_THAT(h.status().message(), HasSubstr(be));
  }
  for (std::string bad : {"<f3", "<U8", "|O", "<M8[ns]", "", "<", "<f16", "<V4", "bf16"}) {
    EXPECT_FALSE(parse(bad).ok()) << bad;
  }
  EXPECT_THAT(
      ErrorOf(NpyWithDict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", 4)),
      HasSubstr("expected a quoted string"));
}

TEST(NpyTest, TruncatedFiles) {
  const int64_t shape[] = {4, 4};
  std::string file = *EncodeNpyHeader(kF32, shape) + std::string(64, '\0');
  ASSERT_TRUE(ParseNpyHeader(file).ok());

  std::string short_data = file.substr(0, file.size() - 1);
  std::string message = ErrorOf(short_data);
  EXPECT_THAT(message, HasSubstr("data_offset 128"));
  EXPECT_THAT(message, HasSubstr("data_bytes 64"));
  EXPECT_THAT(message, HasSubstr("191 bytes"));
  // Only the header is needed when the caller says the data comes later.
  EXPECT_TRUE(ParseNpyHeader(file.substr(0, 128), /*file_is_complete=*/false).ok());

  // Every cut inside the preamble or the dict is refused, none crashes.
  for (size_t n = 0; n < 128; ++n) {
    EXPECT_FALSE(ParseNpyHeader(file.substr(0, n), false).ok()) << "cut at " << n;
  }
}

TEST(NpyTest, CorruptedMagicAndVersion) {
  const int64_t shape[] = {1};
  std::string good = *EncodeNpyHeader(kF32, shape) + std::string(4, '\0');
  for (size_t i = 0; i < 6; ++i) {
    std::string bad = good;
    bad[i] ^= 0x20;
    EXPECT_THAT(ErrorOf(bad), HasSubstr("bad magic")) << "byte " << i;
  }
  EXPECT_THAT(ErrorOf("PK\x03\x04 a zip file"), HasSubstr("bad magic"));
  for (std::pair<char, char> version : {std::pair{'\x04', '\0'}, {'\0', '\0'}, {'\x01', '\x01'}}) {
    std::string bad = good;
    bad[6] = version.first;
    bad[7] = version.second;
    EXPECT_THAT(ErrorOf(bad), HasSubstr("unsupported format version"));
  }
}

TEST(NpyTest, AbsurdHeaderLengths) {
  std::string v1("\x93NUMPY\x01\x00\xff\xff{'descr'", 17);
  EXPECT_THAT(ErrorOf(v1, false), HasSubstr("header length 65535 runs past the end"));
  std::string v2("\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14);
  EXPECT_THAT(ErrorOf(v2, false), HasSubstr("exceeds the limit"));
  std::string v3("\x93NUMPY\x03\x00\x00\x00\x01\x00{}", 14);
  EXPECT_THAT(ErrorOf(v3, false), HasSubstr("runs past the end"));
  EXPECT_THAT(ErrorOf(NpyWithDict("")), HasSubstr("expected '{'"));
}

TEST(NpyTest, MalformedDicts) {
  struct Case {
    std::string dict;
    std::string error;
  };
  const std::string f = "'fortran_order': False";
  const std::vector<Case> cases = {
      {"{'fortran_order': False, 'shape': (1,), }", "no 'descr'"},
      {"{'descr': '<f4', 'shape': (1,), }", "no 'fortran_order'"},
      {"{'descr': '<f4', " + f + ", }", "no 'shape'"},
      {"{}", "no 'descr'"},
      {"{'descr': '<f4', " + f + ", 'shape': (2, 3", "expected ',' or ')'"},
      {"{'descr': '<f4', " + f + ", 'shape': (2, 3,", "expected an integer"},
      {"{'descr': '<f4', " + f + ", 'shape': (-1, 3), }", "negative dimension -1"},
      {"{'descr': '<f4', " + f + ", 'shape': (2.5,), }", "expected ',' or ')'"},
      {"{'descr': '<f4', " + f + ", 'shape': (5), }", "without a comma"},
      {"{'descr': '<f4', " + f + ", 'shape': [2, 3], }", "expected a shape tuple"},
      {"{'descr': '<f4', " + f + ", 'shape': 7, }", "expected a shape tuple"},
      {"{'descr': '<f4', " + f + ", 'shape': (99999999999999999999,), }", "does not fit in int64"},
      {"{'descr': '<f4', " + f + ", 'shape': (4294967296, 4294967296, 4), }", "shape ("},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", "expected True or False"},
      {"{'descr': '<f4', " + f + ", 'shape': (1,), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '<f4', 'descr': '<f4', " + f + ", 'shape': (1,)}", "duplicate key 'descr'"},
      {"{'descr': '<f4, " + f + ", 'shape': (1,)}", "expected ',' or '}'"},
      {"{'descr': '<f4", "unterminated string"},
      {"{'descr': '<\\x66\\x34', " + f + ", 'shape': (1,)}", "escape sequences"},
      {"{'descr' '<f4', " + f + ", 'shape': (1,)}", "expected ':'"},
      {"{'descr': '<f4' " + f + ", 'shape': (1,)}", "expected ',' or '}'"},
      {"{'descr': '<f4', " + f + ", 'shape': (1,)} trailing", "unexpected text after"},
      {"('descr', '<f4')", "expected '{'"},
      {"{'descr': '<f4', " + f + ", 'shape': (1,)", "expected ',' or '}'"},
      {"{, }", "expected a quoted string"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ErrorOf(NpyWithDict(c.dict, 64), false), HasSubstr(c.error)) << c.dict;
  }
  // More dimensions than DLPack tensors may have.
  std::string many = "{'descr': '<f4', " + f + ", 'shape': (";
  for (int i = 0; i < 40; ++i) many += "1, ";
  EXPECT_THAT(ErrorOf(NpyWithDict(many + ")}", 64), false), HasSubstr("more than 32"));
}

std::string WriteTempFile(const std::string& name, const std::string& bytes) {
  std::string path = ::testing::TempDir() + "/npy_test_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(NpyTest, ParsesAMappedFile) {
  const int64_t shape[] = {3, 2};
  std::string file = *EncodeNpyHeader({dlpack::kInt, 16, 1}, shape) + std::string(12, '\x01');
  std::string path = WriteTempFile("a.npy", file);
  absl::StatusOr<std::unique_ptr<MappedFile>> mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_EQ((*mapped)->bytes(), file);
  EXPECT_EQ((*mapped)->path(), path);
  absl::StatusOr<NpyHeader> h = ParseNpyHeader((*mapped)->bytes());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->data_bytes, 12u);
  std::remove(path.c_str());
}

TEST(NpyTest, MappedFileErrors) {
  std::string empty = WriteTempFile("empty.npy", "");
  absl::StatusOr<std::unique_ptr<MappedFile>> mapped = MappedFile::Open(empty);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_TRUE((*mapped)->bytes().empty());
  EXPECT_THAT(ErrorOf((*mapped)->bytes()), HasSubstr("bad magic"));
  std::remove(empty.c_str());

  std::string missing = ::testing::TempDir() + "/npy_test_does_not_exist.npy";
  mapped = MappedFile::Open(missing);
  EXPECT_EQ(mapped.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(mapped.status().message(), HasSubstr(missing));
  EXPECT_THAT(mapped.status().message(), HasSubstr("No such file"));

  mapped = MappedFile::Open(::testing::TempDir());
  EXPECT_EQ(mapped.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mapped.status().message(), HasSubstr("not a regular file"));
}

// When Debian's numpy is present, check against a file numpy itself wrote.
TEST(NpyTest, ReadsAFileNumpyWrote) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3-numpy is not installed";
  }
  std::string path =
      ::testing::TempDir() + "/npy_test_numpy_" + std::to_string(::getpid()) + ".npy";
  std::string cmd = "/usr/bin/python3 -c \"import numpy; numpy.save('" + path +
                    "', numpy.asfortranarray(numpy.arange(24, dtype='<i8').reshape(2, 3, 4)))\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  absl::StatusOr<std::unique_ptr<MappedFile>> mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  absl::StatusOr<NpyHeader> h = ParseNpyHeader((*mapped)->bytes());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(h->layout.dtype == (DLDataType{dlpack::kInt, 64, 1}));
  EXPECT_EQ(h->layout.shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(h->layout.strides, (std::vector<int64_t>{1, 2, 6}));
  EXPECT_EQ(h->data_bytes, 24u * 8);
  // Element [1, 0, 0] is 12 and sits at column-major offset 1.
  int64_t second;
  std::memcpy(&second, (*mapped)->bytes().data() + h->data_offset + 8, 8);
  EXPECT_EQ(second, 12);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tensord::formats
