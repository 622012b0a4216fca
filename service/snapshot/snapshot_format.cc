#include "service/snapshot/snapshot_format.h"

#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "service/common/crc32c.h"
#include "service/common/status_macros.h"
#include "service/common/tensor_name.h"

namespace tensord {
namespace {

constexpr absl::string_view kMagic = "TNSDSNAP";

// A record:
//   u16 name bytes, name, u64 version, i64 created_unix_nanos, u8 retention,
//   u8 dtype code, u8 dtype bits, u16 dtype lanes, i32 device type,
//   i32 device id, u32 ndim, i64 shape[ndim], u8 has_strides,
//   i64 strides[ndim] when has_strides, u64 byte_offset, u64 data_offset,
//   u64 total_bytes, u32 crc32c, i64 origin (0 outside a cluster)
constexpr size_t kMinRecordBytes =
    2 + 1 + 8 + 8 + 1 + 1 + 1 + 2 + 4 + 4 + 4 + 1 + 8 + 8 + 8 + 4 + 8;

class Writer {
 public:
  template <typename T>
  void Put(T value) {
    static_assert(std::is_integral_v<T>);
    using U = std::make_unsigned_t<T>;
    U bits = static_cast<U>(value);
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<char>(bits >> (8 * i)));
  }
  void PutBytes(absl::string_view bytes) { out_.append(bytes.data(), bytes.size()); }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// Reads little-endian fields; every read is bounds-checked and a failed read
// leaves the reader failed, reported once by the caller.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  bool Get(T& value) {
    using U = std::make_unsigned_t<T>;
    if (bytes_.size() - position_ < sizeof(T)) return false;
    U bits = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      bits |= static_cast<U>(static_cast<uint8_t>(bytes_[position_ + i])) << (8 * i);
    }
    position_ += sizeof(T);
    value = static_cast<T>(bits);
    return true;
  }
  bool GetBytes(size_t size, absl::string_view& value) {
    if (bytes_.size() - position_ < size) return false;
    value = bytes_.substr(position_, size);
    position_ += size;
    return true;
  }
  size_t position() const { return position_; }
  size_t remaining() const { return bytes_.size() - position_; }

 private:
  absl::string_view bytes_;
  size_t position_ = 0;
};

uint64_t AlignUp(uint64_t value) {
  return (value + kSnapshotDataAlignment - 1) / kSnapshotDataAlignment * kSnapshotDataAlignment;
}

void EncodeRecord(const SnapshotEntry& entry, Writer& writer) {
  writer.Put(static_cast<uint16_t>(entry.name.size()));
  writer.PutBytes(entry.name);
  writer.Put(entry.version);
  writer.Put(entry.created_unix_nanos);
  writer.Put(static_cast<uint8_t>(entry.retention));
  writer.Put(entry.layout.dtype.code);
  writer.Put(entry.layout.dtype.bits);
  writer.Put(entry.layout.dtype.lanes);
  writer.Put(static_cast<int32_t>(entry.layout.device.device_type));
  writer.Put(static_cast<int32_t>(entry.layout.device.device_id));
  writer.Put(static_cast<uint32_t>(entry.layout.shape.size()));
  for (int64_t extent : entry.layout.shape) writer.Put(extent);
  writer.Put(static_cast<uint8_t>(entry.layout.strides.empty() ? 0 : 1));
  for (int64_t stride : entry.layout.strides) writer.Put(stride);
  writer.Put(entry.layout.byte_offset);
  writer.Put(entry.data_offset);
  writer.Put(entry.total_bytes);
  writer.Put(entry.crc32c);
  writer.Put(entry.origin);
}

absl::Status ManifestError(size_t index, size_t position, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("manifest record ", index, " (manifest byte ", position, "): ", what));
}

absl::StatusOr<SnapshotEntry> DecodeRecord(Reader& reader, size_t index) {
  SnapshotEntry entry;
  const size_t start = reader.position();
  auto truncated = [&] { return ManifestError(index, start, "record is truncated"); };
  uint16_t name_bytes = 0;
  absl::string_view name;
  if (!reader.Get(name_bytes) || !reader.GetBytes(name_bytes, name)) return truncated();
  entry.name = std::string(name);
  if (absl::Status valid = ValidateTensorName(entry.name); !valid.ok()) {
    return ManifestError(index, start, valid.message());
  }
  uint8_t retention = 0;
  int32_t device_type = 0, device_id = 0;
  uint32_t ndim = 0;
  if (!reader.Get(entry.version) || !reader.Get(entry.created_unix_nanos) ||
      !reader.Get(retention) || !reader.Get(entry.layout.dtype.code) ||
      !reader.Get(entry.layout.dtype.bits) || !reader.Get(entry.layout.dtype.lanes) ||
      !reader.Get(device_type) || !reader.Get(device_id) || !reader.Get(ndim)) {
    return truncated();
  }
  if (retention != static_cast<uint8_t>(Retention::kDefault) &&
      retention != static_cast<uint8_t>(Retention::kPinned)) {
    return ManifestError(index, start,
                         absl::StrCat("tensor '", entry.name, "' has retention ", retention,
                                      ", not a durable one (0 default, 1 pinned)"));
  }
  entry.retention = static_cast<Retention>(retention);
  if (entry.version == 0) {
    return ManifestError(index, start, absl::StrCat("tensor '", entry.name, "' has version 0"));
  }
  if (ndim > static_cast<uint32_t>(dlpack::kMaxDims)) {
    return ManifestError(index, start,
                         absl::StrCat("tensor '", entry.name, "' has ", ndim,
                                      " dimensions; at most ", dlpack::kMaxDims));
  }
  // Checked as the raw integer: a DLDeviceType outside the enum's values
  // would be undefined behaviour to hold.
  if (device_type != kDLCPU || device_id != 0) {
    return ManifestError(index, start,
                         absl::StrCat("tensor '", entry.name, "' has device {type ", device_type,
                                      ", id ", device_id, "}; snapshots hold host tensors"));
  }
  entry.layout.device = DLDevice{kDLCPU, 0};
  entry.layout.shape.resize(ndim);
  for (int64_t& extent : entry.layout.shape) {
    if (!reader.Get(extent)) return truncated();
  }
  uint8_t has_strides = 0;
  if (!reader.Get(has_strides)) return truncated();
  if (has_strides > 1) {
    return ManifestError(index, start, absl::StrCat("has_strides is ", has_strides));
  }
  if (has_strides == 1) {
    entry.layout.strides.resize(ndim);
    for (int64_t& stride : entry.layout.strides) {
      if (!reader.Get(stride)) return truncated();
    }
  }
  if (!reader.Get(entry.layout.byte_offset) || !reader.Get(entry.data_offset) ||
      !reader.Get(entry.total_bytes) || !reader.Get(entry.crc32c) || !reader.Get(entry.origin)) {
    return truncated();
  }
  if (entry.origin < 0) {
    return ManifestError(index, start,
                         absl::StrCat("tensor '", entry.name, "' has origin ", entry.origin));
  }
  absl::StatusOr<uint64_t> required = dlpack::RequiredBytes(entry.layout);
  if (!required.ok()) {
    return ManifestError(index, start,
                         absl::StrCat("tensor '", entry.name, "': ", required.status().message()));
  }
  if (*required != entry.total_bytes) {
    return ManifestError(index, start,
                         absl::StrCat("tensor '", entry.name, "' records ", entry.total_bytes,
                                      " bytes but its layout ",
                                      dlpack::DescribeLayout(entry.layout), " needs ", *required));
  }
  return entry;
}

}  // namespace

std::string EncodeSnapshotPrefix(std::span<SnapshotEntry> entries, uint64_t next_version) {
  Writer manifest;
  for (const SnapshotEntry& entry : entries) EncodeRecord(entry, manifest);
  // The data offsets are part of the records, and the records' size does not
  // depend on their values, so encode once to learn the size, then again.
  uint64_t offset = AlignUp(kSnapshotHeaderBytes + manifest.out().size());
  for (SnapshotEntry& entry : entries) {
    entry.data_offset = offset;
    offset = AlignUp(offset + entry.total_bytes);
  }
  Writer records;
  for (const SnapshotEntry& entry : entries) EncodeRecord(entry, records);

  Writer header;
  header.PutBytes(kMagic);
  header.Put(kSnapshotFormatVersion);
  header.Put(static_cast<uint32_t>(entries.size()));
  header.Put(static_cast<uint64_t>(records.out().size()));
  header.Put(next_version);
  header.Put(Crc32c(records.out().data(), records.out().size()));
  header.Put(Crc32c(header.out().data(), header.out().size()));
  std::string prefix = std::move(header.out());
  prefix.append(records.out());
  return prefix;
}

uint64_t SnapshotFileBytes(std::span<const SnapshotEntry> entries, uint64_t prefix_bytes) {
  if (entries.empty()) return prefix_bytes;
  return entries.back().data_offset + entries.back().total_bytes;
}

absl::StatusOr<SnapshotContents> ParseSnapshot(absl::string_view file) {
  if (file.size() < kSnapshotHeaderBytes) {
    return absl::DataLossError(absl::StrCat("file is ", file.size(), " bytes, shorter than the ",
                                            kSnapshotHeaderBytes, "-byte header"));
  }
  if (file.substr(0, kMagic.size()) != kMagic) {
    return absl::DataLossError(absl::StrCat("bad magic '", absl::CHexEscape(file.substr(0, 8)),
                                            "', expected '", kMagic, "'"));
  }
  Reader header(file.substr(kMagic.size(), kSnapshotHeaderBytes - kMagic.size()));
  uint32_t format_version = 0, entry_count = 0, manifest_crc = 0, header_crc = 0;
  uint64_t manifest_bytes = 0, next_version = 0;
  header.Get(format_version);
  header.Get(entry_count);
  header.Get(manifest_bytes);
  header.Get(next_version);
  header.Get(manifest_crc);
  header.Get(header_crc);
  if (uint32_t actual = Crc32c(file.data(), kSnapshotHeaderBytes - 4); actual != header_crc) {
    return absl::DataLossError(
        absl::StrCat("header crc32c is ", actual, " but the header records ", header_crc));
  }
  if (format_version != kSnapshotFormatVersion) {
    return absl::DataLossError(absl::StrCat("format version ", format_version,
                                            " is not the supported version ",
                                            kSnapshotFormatVersion));
  }
  if (manifest_bytes > file.size() - kSnapshotHeaderBytes) {
    return absl::DataLossError(absl::StrCat("manifest of ", manifest_bytes,
                                            " bytes reaches beyond the end of the ", file.size(),
                                            "-byte file"));
  }
  absl::string_view manifest = file.substr(kSnapshotHeaderBytes, manifest_bytes);
  if (uint32_t actual = Crc32c(manifest.data(), manifest.size()); actual != manifest_crc) {
    return absl::DataLossError(
        absl::StrCat("manifest crc32c is ", actual, " but the header records ", manifest_crc));
  }
  if (entry_count > manifest_bytes / kMinRecordBytes) {
    return absl::DataLossError(absl::StrCat("entry count ", entry_count, " cannot fit in a ",
                                            manifest_bytes, "-byte manifest"));
  }

  SnapshotContents contents{.next_version = next_version};
  std::vector<SnapshotEntry>& entries = contents.entries;
  entries.reserve(entry_count);
  absl::flat_hash_set<std::string> names;
  Reader reader(manifest);
  uint64_t data_end = kSnapshotHeaderBytes + manifest_bytes;
  for (uint32_t i = 0; i < entry_count; ++i) {
    const size_t start = reader.position();
    TENSORD_ASSIGN_OR_RETURN(SnapshotEntry entry, DecodeRecord(reader, i));
    if (!names.insert(entry.name).second) {
      return ManifestError(i, start, absl::StrCat("tensor '", entry.name, "' appears twice"));
    }
    // Versions may repeat: the items of an atomic group share one.
    if (entry.version >= next_version) {
      return ManifestError(i, start,
                           absl::StrCat("tensor '", entry.name, "' has version ", entry.version,
                                        ", not below the header's next version ", next_version));
    }
    uint64_t end = 0;
    if (entry.data_offset < data_end ||
        __builtin_add_overflow(entry.data_offset, entry.total_bytes, &end) || end > file.size()) {
      return ManifestError(
          i, start,
          absl::StrCat("bytes of tensor '", entry.name, "' at [", entry.data_offset, ", +",
                       entry.total_bytes, ") are not after the previous data (", data_end,
                       ") and inside the ", file.size(), "-byte file"));
    }
    data_end = end;
    entries.push_back(std::move(entry));
  }
  if (reader.remaining() != 0) {
    return absl::DataLossError(absl::StrCat("manifest has ", reader.remaining(),
                                            " bytes after its ", entry_count, " records"));
  }
  if (file.size() != data_end) {
    return absl::DataLossError(absl::StrCat("file is ", file.size(),
                                            " bytes but its last tensor ends at byte ", data_end));
  }
  return contents;
}

absl::Status VerifySnapshotEntry(absl::string_view file, const SnapshotEntry& entry) {
  if (entry.data_offset > file.size() || entry.total_bytes > file.size() - entry.data_offset) {
    return absl::DataLossError(
        absl::StrCat("bytes of tensor '", entry.name, "' reach beyond the file"));
  }
  const uint32_t actual = Crc32c(file.data() + entry.data_offset, entry.total_bytes);
  if (actual != entry.crc32c) {
    return absl::DataLossError(absl::StrCat("bytes of tensor '", entry.name, "' version ",
                                            entry.version, " have crc32c ", actual,
                                            " but the manifest records ", entry.crc32c));
  }
  return absl::OkStatus();
}

}  // namespace tensord
