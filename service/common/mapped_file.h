// A read-only memory mapping of a whole file, owned (RAII).
#ifndef TENSORD_SERVICE_COMMON_MAPPED_FILE_H_
#define TENSORD_SERVICE_COMMON_MAPPED_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tensord {

class MappedFile {
 public:
  // Maps `path` read-only and shared (bytes written to the file later show
  // in the view). NOT_FOUND / PERMISSION_DENIED / INVALID_ARGUMENT
  // (not a regular file) name the path and the errno text. An empty file maps
  // to an empty view.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, void* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  void* data_;
  size_t size_;
};

}  // namespace tensord

#endif  // TENSORD_SERVICE_COMMON_MAPPED_FILE_H_
