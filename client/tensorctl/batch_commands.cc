// put-many SOURCE and get-many PREFIX -o DIR: many tensors in few calls.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/tensorctl/commands.h"
#include "client/tensorctl/file_tensor.h"
#include "client/tensorctl/npy_output.h"
#include "client/tensorctl/output_file.h"
#include "client/tensorctl/progress_bar.h"
#include "client/tensorctl/tensor_text.h"
#include "service/common/byte_size.h"
#include "service/common/mapped_file.h"
#include "service/common/status_macros.h"
#include "service/dlpack/tensor_layout.h"
#include "service/formats/npy.h"
#include "service/formats/safetensors.h"

namespace tensord::tensorctl {
namespace {

// Files up to this size are read into memory, larger ones mapped: a
// directory of a hundred thousand small files would otherwise need a
// mapping each, past the kernel's per-process limit (vm.max_map_count).
constexpr uint64_t kReadWholeBytes = 1 << 20;
// Files open (read or mapped) at once in a plain put-many of a directory.
constexpr size_t kFilesPerBatch = 4096;
// Items whose errors are printed; the rest are counted.
constexpr size_t kErrorsShown = 10;

// The bytes of one source file, read or mapped.
class SourceFile {
 public:
  static absl::StatusOr<SourceFile> Open(const std::string& path) {
    SourceFile file;
    std::error_code error;
    const uint64_t size = std::filesystem::file_size(path, error);
    if (!error && size <= kReadWholeBytes) {
      std::ifstream in(path, std::ios::binary);
      file.contents_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (in.bad() || file.contents_.size() != size) {
        return absl::DataLossError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
      }
      return file;
    }
    TENSORD_ASSIGN_OR_RETURN(file.mapped_, MappedFile::Open(path));
    return file;
  }
  std::string_view bytes() const { return mapped_ ? mapped_->bytes() : contents_; }

 private:
  std::string contents_;
  std::unique_ptr<MappedFile> mapped_;
};

// Tensors to put: their names, retention, and what keeps their bytes.
struct PutSource {
  std::vector<std::string> names;
  std::vector<DLTensor> tensors;
  // Deques: the tensors point into the files' bytes and into the layouts'
  // shapes and strides, which must not move.
  std::deque<SourceFile> files;
  std::deque<dlpack::TensorLayout> layouts;
  uint64_t bytes = 0;
};

absl::StatusOr<Retention> RetentionOf(const Invocation& invocation) {
  if (invocation.Has(kCacheOption) && invocation.Has(kPinOption)) {
    return absl::InvalidArgumentError("--cache and --pin exclude each other");
  }
  if (invocation.Has(kCacheOption)) return Retention::kCache;
  if (invocation.Has(kPinOption)) return Retention::kPinned;
  return Retention::kDefault;
}

// The .npy files under `directory`, sorted, as paths relative to it.
absl::StatusOr<std::vector<std::string>> NpyFilesUnder(const std::string& directory) {
  std::vector<std::string> files;
  std::error_code error;
  for (auto it = std::filesystem::recursive_directory_iterator(directory, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_regular_file() && it->path().extension() == ".npy") {
      files.push_back(std::filesystem::relative(it->path(), directory).string());
    }
  }
  if (error) {
    return absl::NotFoundError(
        absl::StrCat("cannot read directory ", directory, ": ", error.message()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Adds the .npy file `path` as tensor `name`.
absl::Status AddNpy(const std::string& path, std::string name, PutSource& source) {
  TENSORD_ASSIGN_OR_RETURN(SourceFile file, SourceFile::Open(path));
  absl::StatusOr<formats::NpyHeader> header = formats::ParseNpyHeader(file.bytes());
  if (!header.ok()) return WithContext(header.status(), path);
  source.files.push_back(std::move(file));
  source.layouts.push_back(header->layout);
  absl::StatusOr<DLTensor> tensor =
      FileTensor(source.files.back().bytes(), header->data_offset,
                 header->data_offset + header->data_bytes, source.layouts.back());
  if (!tensor.ok()) return WithContext(tensor.status(), path);
  source.names.push_back(std::move(name));
  source.tensors.push_back(*tensor);
  source.bytes += header->data_bytes;
  return absl::OkStatus();
}

struct PutTally {
  size_t published = 0;
  size_t failed = 0;
  uint64_t bytes = 0;
  uint64_t group_version = 0;
  uint64_t cluster_group = 0;
};

// One BatchPut of `source`'s tensors; failed items are printed (the first
// few) and counted.
absl::Status PutBatch(Client& client, const PutSource& source, Retention retention, bool atomic,
                      ProgressBar& progress, size_t done_before, size_t total, PutTally& tally) {
  std::vector<BatchPutItem> items;
  items.reserve(source.names.size());
  for (size_t i = 0; i < source.names.size(); ++i) {
    items.push_back(BatchPutItem{source.names[i], source.tensors[i], retention});
  }
  BatchPutOptions options;
  options.atomic = atomic;
  options.send_crc32c = true;
  options.progress = [&progress, done_before, total](uint64_t done, uint64_t) {
    progress.Update(done_before + done, total);
  };
  TENSORD_ASSIGN_OR_RETURN(BatchPutResult result, client.BatchPut(items, options));
  for (size_t i = 0; i < result.items.size(); ++i) {
    if (result.items[i].ok()) {
      ++tally.published;
      tally.bytes += result.items[i]->total_bytes;
      continue;
    }
    if (tally.failed++ < kErrorsShown) {
      absl::FPrintF(stderr, "put-many: %s: %s\n", source.names[i],
                    result.items[i].status().ToString());
    }
  }
  tally.group_version = result.group_version;
  tally.cluster_group = result.cluster_group;
  return absl::OkStatus();
}

}  // namespace

absl::Status RunPutMany(Client& client, const Invocation& invocation) {
  const std::string& path = invocation.arguments[0];
  const std::string prefix = invocation.Text(kPrefixOption);
  const bool atomic = invocation.Has(kAtomicOption);
  TENSORD_ASSIGN_OR_RETURN(Retention retention, RetentionOf(invocation));
  ProgressBar progress(absl::StrCat("put-many ", path));
  const absl::Time start = absl::Now();
  PutTally tally;
  size_t total = 0;

  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    TENSORD_ASSIGN_OR_RETURN(std::vector<std::string> files, NpyFilesUnder(path));
    total = files.size();
    if (atomic && total > kMaxBatchItems) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " holds ", total, " .npy files; an atomic put-many takes at most ",
                       kMaxBatchItems));
    }
    // A plain put-many goes a slice of files at a time, so the files open at
    // once stay few; an atomic one is one batch.
    const size_t step = atomic ? std::max<size_t>(total, 1) : kFilesPerBatch;
    for (size_t begin = 0; begin < total; begin += step) {
      PutSource source;
      for (size_t i = begin; i < std::min(total, begin + step); ++i) {
        std::string name = prefix + files[i].substr(0, files[i].size() - 4);  // less ".npy"
        TENSORD_RETURN_IF_ERROR(AddNpy(absl::StrCat(path, "/", files[i]), std::move(name), source));
      }
      TENSORD_RETURN_IF_ERROR(
          PutBatch(client, source, retention, atomic, progress, begin, total, tally));
    }
  } else {
    // A .safetensors file: the whole header is checked before the first put.
    TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
    absl::StatusOr<formats::SafetensorsIndex> index = formats::ParseSafetensors(file->bytes());
    if (!index.ok()) return WithContext(index.status(), path);
    PutSource source;
    for (const formats::SafetensorsEntry& entry : index->entries) {
      absl::StatusOr<DLTensor> tensor =
          FileTensor(file->bytes(), entry.begin, entry.end, entry.layout);
      if (!tensor.ok()) return WithContext(tensor.status(), absl::StrCat(path, ": ", entry.name));
      source.names.push_back(prefix + entry.name);
      source.tensors.push_back(*tensor);
    }
    total = source.names.size();
    TENSORD_RETURN_IF_ERROR(PutBatch(client, source, retention, atomic, progress, 0, total, tally));
  }
  progress.Finish();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  absl::PrintF("put-many %s: %d of %d tensors, %s in %.2f s (%s)%s%s\n", path, tally.published,
               total, FormatByteSize(tally.bytes), seconds, FormatThroughput(tally.bytes, seconds),
               tally.group_version != 0 ? absl::StrCat(", group version ", tally.group_version)
                                        : std::string(),
               tally.cluster_group != 0 ? absl::StrCat(", cluster group ", tally.cluster_group)
                                        : std::string());
  if (tally.failed > 0) {
    return absl::Status(
        atomic ? absl::StatusCode::kAborted : absl::StatusCode::kFailedPrecondition,
        absl::StrCat(tally.failed, " of ", total, " tensors were not published",
                     atomic ? " (atomic: none was)" : "",
                     tally.failed > kErrorsShown ? "; the first ones are listed above" : ""));
  }
  return absl::OkStatus();
}

absl::Status RunGetMany(Client& client, const Invocation& invocation) {
  const std::string& prefix = invocation.arguments[0];
  const std::string directory = invocation.Text(kOutputOption);
  const uint64_t group = invocation.Number(kVersionOption);
  const bool cluster_group = invocation.Has(kClusterOption);
  if (cluster_group && group == 0) {
    return absl::InvalidArgumentError(
        "get-many --cluster reads one cluster group: give its number with --version N");
  }
  ProgressBar progress(absl::StrCat("get-many ", prefix));
  const absl::Time start = absl::Now();
  FetchOptions options;
  options.verify_crc32c = true;
  absl::StatusOr<std::vector<Tensor>> tensors =
      cluster_group ? client.BatchFetchClusterGroup(group, options)
      : group != 0  ? client.BatchFetchGroup(group, options)
                    : client.BatchFetchPrefix(prefix, options);
  TENSORD_RETURN_IF_ERROR(tensors.status());
  size_t written = 0;
  uint64_t bytes = 0;
  for (const Tensor& tensor : *tensors) {
    const TensorInfo& info = tensor.info();
    if (!absl::StartsWith(info.name, prefix)) continue;  // a group's other names
    // Names are checked by the server (no leading '/', no '..' segment), so
    // the path stays inside the directory.
    const std::filesystem::path file =
        std::filesystem::path(directory) / absl::StrCat(info.name.substr(prefix.size()), ".npy");
    std::error_code error;
    std::filesystem::create_directories(file.parent_path(), error);
    if (error) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create ", file.parent_path().string(), ": ", error.message()));
    }
    TENSORD_ASSIGN_OR_RETURN(std::string header, NpyHeaderFor(info.name, info));
    TENSORD_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> output, OutputFile::Create(file.string()));
    TENSORD_RETURN_IF_ERROR(output->Write(header));
    TENSORD_RETURN_IF_ERROR(WriteCompact(tensor, *output));
    TENSORD_RETURN_IF_ERROR(output->Commit());
    ++written;
    bytes += info.total_bytes;
    progress.Update(written, tensors->size());
  }
  progress.Finish();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  absl::PrintF("get-many %s: %d tensors, %s in %.2f s (%s) -> %s\n", prefix, written,
               FormatByteSize(bytes), seconds, FormatThroughput(bytes, seconds), directory);
  return absl::OkStatus();
}

}  // namespace tensord::tensorctl
