#include "service/formats/safetensors.h"
#include "absl/strings/string_view.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "service/common/absl_view.h"
#include "service/common/status_macros.h"
#include "service/dlpack/data_type.h"

namespace tensord::formats {
namespace {

using Json = nlohmann::json;

// Finds the first top-level key that appears twice, in one linear SAX pass
// that builds nothing. (nlohmann keeps the last of duplicate keys silently,
// and its callback parser rescans the parent object at the end of every
// child object: quadratic, 52 s for a header of 100,000 tensors.)
class DuplicateKeyFinder final : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    ++depth_;
    return true;
  }
  bool key(string_t& key) override {
    if (depth_ == 1 && !duplicate_ && !names_.insert(key).second) duplicate_ = key;
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

  const std::optional<std::string>& duplicate() const { return duplicate_; }

 private:
  int depth_ = 0;
  std::set<std::string, std::less<>> names_;
  std::optional<std::string> duplicate_;
};

// The reference implementation's limit: a larger header is corrupt or hostile.
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
constexpr size_t kLengthBytes = 8;

struct DtypeName {
  std::string_view name;
  DLDataType dtype;
};

constexpr std::array<DtypeName, 16> kDtypes = {{
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
}};

absl::Status Error(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("safetensors: ", AsAbsl(what)));
}

absl::Status TensorError(std::string_view name, std::string_view what) {
  return Error(
      absl::StrCat("tensor '", absl::Utf8SafeCHexEscape(AsAbsl(name)), "': ", AsAbsl(what)));
}

// Renders a JSON value for an error message, cut short so a hostile header
// cannot make the message huge.
std::string Excerpt(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 64) text = text.substr(0, 64) + "...";
  return text;
}

// A JSON non-negative integer that fits `max`, or nullopt.
std::optional<uint64_t> AsUnsigned(const Json& value, uint64_t max) {
  if (!value.is_number_unsigned()) return std::nullopt;
  uint64_t v = value.get<uint64_t>();
  if (v > max) return std::nullopt;
  return v;
}

absl::StatusOr<SafetensorsEntry> ParseEntry(const std::string& name, const Json& info,
                                            uint64_t data_start, uint64_t data_size) {
  if (!info.is_object()) return TensorError(name, "entry is not a JSON object");
  auto dtype_it = info.find("dtype");
  auto shape_it = info.find("shape");
  auto offsets_it = info.find("data_offsets");
  if (dtype_it == info.end() || shape_it == info.end() || offsets_it == info.end()) {
    return TensorError(name, "entry needs 'dtype', 'shape' and 'data_offsets'");
  }

  SafetensorsEntry entry;
  entry.name = name;
  if (!dtype_it->is_string())
    return TensorError(name, "dtype " + Excerpt(*dtype_it) + " is not a string");
  const std::string& dtype_name = dtype_it->get_ref<const std::string&>();
  const DtypeName* known = nullptr;
  for (const DtypeName& d : kDtypes) {
    if (d.name == dtype_name) known = &d;
  }
  if (known == nullptr) {
    return TensorError(
        name, absl::StrCat("unsupported dtype '", absl::Utf8SafeCHexEscape(dtype_name), "'"));
  }
  entry.layout.dtype = known->dtype;

  if (!shape_it->is_array())
    return TensorError(name, "shape " + Excerpt(*shape_it) + " is not an array");
  if (shape_it->size() > static_cast<size_t>(dlpack::kMaxDims)) {
    return TensorError(name, absl::StrCat("shape has ", shape_it->size(), " dimensions, more than ",
                                          dlpack::kMaxDims));
  }
  for (const Json& dim : *shape_it) {
    std::optional<uint64_t> extent = AsUnsigned(dim, std::numeric_limits<int64_t>::max());
    if (!extent) {
      return TensorError(name, absl::StrCat("shape ", Excerpt(*shape_it), " has extent ",
                                            Excerpt(dim), ", not an integer in [0, 2^63)"));
    }
    entry.layout.shape.push_back(static_cast<int64_t>(*extent));
  }
  absl::StatusOr<uint64_t> bytes = dlpack::CompactByteSize(entry.layout.dtype, entry.layout.shape);
  if (!bytes.ok()) {
    // Our own prefix names the value whatever the dlpack message says.
    return TensorError(name,
                       absl::StrCat("shape ", Excerpt(*shape_it), ": ", bytes.status().message()));
  }

  const Json& offsets = *offsets_it;
  std::optional<uint64_t> begin, end;
  if (offsets.is_array() && offsets.size() == 2) {
    begin = AsUnsigned(offsets[0], std::numeric_limits<uint64_t>::max());
    end = AsUnsigned(offsets[1], std::numeric_limits<uint64_t>::max());
  }
  if (!begin || !end || *begin > *end) {
    return TensorError(name, absl::StrCat("data_offsets ", Excerpt(offsets),
                                          " is not [begin, end] with 0 <= begin <= end"));
  }
  if (*end > data_size) {
    return TensorError(name,
                       absl::StrCat("data_offsets ", Excerpt(offsets), " run past the end of the ",
                                    data_size, "-byte data section"));
  }
  if (*end - *begin != *bytes) {
    return TensorError(name, absl::StrCat("data_offsets ", Excerpt(offsets), " span ",
                                          *end - *begin, " bytes but ", AsAbsl(known->name),
                                          " shape ", Excerpt(*shape_it), " needs ", *bytes));
  }
  // Cannot overflow: end <= data_size and data_start + data_size == file size.
  entry.begin = data_start + *begin;
  entry.end = data_start + *end;
  return entry;
}

absl::Status ParseMetadata(const Json& value, std::map<std::string, std::string>& out) {
  if (value.is_null()) return absl::OkStatus();  // the reference writer's None
  if (!value.is_object()) return Error("__metadata__ " + Excerpt(value) + " is not an object");
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!it->is_string()) {
      return Error(absl::StrCat("__metadata__ key '", absl::Utf8SafeCHexEscape(it.key()),
                                "' has non-string value ", Excerpt(*it)));
    }
    out.emplace(it.key(), it->get<std::string>());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SafetensorsIndex> ParseSafetensors(std::string_view file) {
  if (file.size() < kLengthBytes) {
    return Error(absl::StrCat("file of ", file.size(), " bytes has no 8-byte header length"));
  }
  uint64_t header_bytes = 0;
  for (size_t i = kLengthBytes; i-- > 0;) {
    header_bytes = header_bytes << 8 | static_cast<unsigned char>(file[i]);
  }
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return Error(absl::StrCat("header length ", header_bytes, " exceeds the limit of ",
                              kMaxSafetensorsHeaderBytes));
  }
  if (header_bytes > file.size() - kLengthBytes) {
    return Error(absl::StrCat("header length ", header_bytes, " runs past the end of the ",
                              file.size(), "-byte file"));
  }
  const std::string_view text = file.substr(kLengthBytes, header_bytes);

  DuplicateKeyFinder keys;
  if (!Json::sax_parse(text.begin(), text.end(), &keys, nlohmann::detail::input_format_t::json,
                       /*strict=*/true, /*ignore_comments=*/false)) {
    return Error("header is not valid JSON");
  }
  Json header = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) return Error("header is not valid JSON");
  if (!header.is_object()) return Error("header is not a JSON object");
  if (keys.duplicate()) return TensorError(*keys.duplicate(), "name appears more than once");

  const uint64_t data_start = kLengthBytes + header_bytes;
  const uint64_t data_size = file.size() - data_start;
  SafetensorsIndex index;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      TENSORD_RETURN_IF_ERROR(ParseMetadata(*it, index.metadata));
      continue;
    }
    TENSORD_ASSIGN_OR_RETURN(SafetensorsEntry entry,
                             ParseEntry(it.key(), *it, data_start, data_size));
    index.entries.push_back(std::move(entry));
  }

  // Ties on begin put empty ranges first, so an empty tensor at the start of
  // another is not an overlap but one strictly inside it is.
  std::sort(index.entries.begin(), index.entries.end(), [](const auto& a, const auto& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  for (size_t i = 1; i < index.entries.size(); ++i) {
    const SafetensorsEntry& prev = index.entries[i - 1];
    const SafetensorsEntry& cur = index.entries[i];
    if (cur.begin < prev.end) {
      return TensorError(
          cur.name,
          absl::StrCat("bytes [", cur.begin - data_start, ", ", cur.end - data_start,
                       ") overlap tensor '", absl::Utf8SafeCHexEscape(prev.name), "' at [",
                       prev.begin - data_start, ", ", prev.end - data_start, ")"));
    }
  }
  return index;
}

}  // namespace tensord::formats
