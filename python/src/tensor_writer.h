// tensord.TensorWriter: the zero-copy create/seal path (Client.create) as a
// Python object whose buffer numpy and torch fill in place.
#ifndef TENSORD_PYTHON_SRC_TENSOR_WRITER_H_
#define TENSORD_PYTHON_SRC_TENSOR_WRITER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>

#include "tensord/client.h"

namespace tensord::python {

struct WriterBuffer;

// One pending create. Python views of its buffer (DLPack capsules, buffer
// protocol views) share the buffer with this object; seal() unmaps the
// buffer, so it refuses while any view is alive. A writer dropped unsealed
// aborts its create (once the last view is gone too).
class PythonTensorWriter {
 public:
  PythonTensorWriter(std::unique_ptr<TensorWriter> writer, std::string name, DLDataType dtype,
                     std::vector<int64_t> shape);
  PythonTensorWriter(PythonTensorWriter&&) = default;
  PythonTensorWriter(const PythonTensorWriter&) = delete;
  PythonTensorWriter& operator=(const PythonTensorWriter&) = delete;

  // Publishes the bytes; the writer is finished afterwards either way.
  TensorInfo Seal(bool send_crc32c);
  // Gives the create up (the server forgets it once every view is gone).
  // Idempotent; a no-op after seal.
  void Abort();
  // ValueError once sealed or aborted, BufferError while views are alive;
  // `call` names the caller.
  void CheckSealable(const char* call) const;
  // The C++ writer, taken to be sealed (Seal, Client.seal_group) after
  // CheckSealable; the writer counts as sealed from then on.
  std::unique_ptr<TensorWriter> TakeForSeal(const char* call);

  bool open() const { return buffer_ != nullptr; }
  const char* state() const;
  // The buffer while open; ValueError naming the state otherwise.
  const std::shared_ptr<WriterBuffer>& buffer() const;
  const std::string& name() const { return name_; }
  DLDataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  DLDevice device() const { return device_; }
  uint64_t nbytes() const { return nbytes_; }
  // What seal() (or Client.seal_group) published; nullopt before.
  const std::optional<TensorInfo>& info() const { return info_; }
  void set_info(TensorInfo info) { info_ = std::move(info); }

 private:
  std::optional<TensorInfo> info_;
  std::shared_ptr<WriterBuffer> buffer_;  // null once sealed or aborted
  bool sealed_ = false;
  const std::string name_;
  const DLDataType dtype_;
  const std::vector<int64_t> shape_;
  const DLDevice device_;
  const uint64_t nbytes_;
};

// tensord.TensorWriter, with __dlpack__, __dlpack_device__, the writable
// buffer protocol (host writers), seal/abort and the context manager.
void BindTensorWriter(nanobind::module_& module);

// "float32", numpy dtypes and scalar types, torch dtypes: a DLPack dtype;
// ValueError naming the value otherwise.
DLDataType DtypeArgument(nanobind::handle dtype);

// None (host), "cpu", "cuda", "cuda:N", or a DLPack (device_type, id) tuple.
std::optional<DLDevice> DeviceArgument(nanobind::handle device);

}  // namespace tensord::python

#endif  // TENSORD_PYTHON_SRC_TENSOR_WRITER_H_
