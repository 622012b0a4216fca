// fetch_into's destinations that have the buffer protocol but no __dlpack__
// (bytearray, array.array, memoryview, mmap).
#ifndef TENSORD_PYTHON_SRC_BUFFER_DESTINATION_H_
#define TENSORD_PYTHON_SRC_BUFFER_DESTINATION_H_

#include <memory>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>

#include "absl/status/statusor.h"
#include "tensord/client.h"

namespace tensord::python {

// A writable buffer held (PyBuffer_Release runs when this is destroyed; the
// GIL must be held then) and described as a DLPack tensor.
class BufferDestination {
 public:
  // ValueError when the buffer is read-only or its format has no dtype,
  // TypeError when `object` has no buffer protocol.
  explicit BufferDestination(nanobind::handle object);

  // A 1-D contiguous byte buffer ('B', 'b', 'c'): takes the tensor's bytes
  // in row-major order whatever its dtype (RawTensorFor).
  bool raw_bytes() const { return raw_bytes_; }
  // The buffer as typed by its format, shape and strides.
  const DLTensor& typed() const { return typed_; }
  // The buffer as the compact (row-major) tensor `info` describes;
  // INVALID_ARGUMENT naming both sizes unless the byte counts are equal.
  // Valid until the next call.
  absl::StatusOr<DLTensor> RawTensorFor(const TensorInfo& info);
  const std::string& type_name() const { return type_name_; }

 private:
  struct Release {
    void operator()(Py_buffer* view) const;
  };
  std::unique_ptr<Py_buffer, Release> view_;
  std::string type_name_;
  bool raw_bytes_ = false;
  DLTensor typed_{};
  std::vector<int64_t> shape_, strides_;
  std::vector<int64_t> raw_strides_;
};

}  // namespace tensord::python

#endif  // TENSORD_PYTHON_SRC_BUFFER_DESTINATION_H_
