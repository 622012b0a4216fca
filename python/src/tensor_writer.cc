#include "python/src/tensor_writer.h"

#include <atomic>
#include <optional>
#include <utility>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "python/src/buffer_format.h"
#include "python/src/dlpack_export.h"
#include "python/src/status_error.h"
#include "service/dlpack/data_type.h"
#include "service/dlpack/tensor_layout.h"

namespace tensord::python {

namespace nb = nanobind;
using namespace nb::literals;

// The C++ writer and the DLTensor its views show. Shared by the Python
// writer and every live view; the last of them to go destroys the C++
// writer, which aborts an unsealed create.
struct WriterBuffer {
  std::unique_ptr<TensorWriter> writer;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLTensor tensor{};
  std::atomic<int64_t> live_views{0};
};

namespace {

// One live view of a writer's buffer (a DLPack export or a buffer protocol
// view); counted so that seal() can refuse to unmap memory still in use.
class WriterView {
 public:
  explicit WriterView(std::shared_ptr<WriterBuffer> buffer) : buffer_(std::move(buffer)) {
    buffer_->live_views.fetch_add(1);
  }
  ~WriterView() { buffer_->live_views.fetch_sub(1); }
  WriterView(const WriterView&) = delete;
  WriterView& operator=(const WriterView&) = delete;
  const WriterBuffer& buffer() const { return *buffer_; }

 private:
  std::shared_ptr<WriterBuffer> buffer_;
};

std::string Repr(nb::handle value) { return nb::repr(value).c_str(); }

nb::tuple IntTuple(const std::vector<int64_t>& values) {
  nb::list list;
  for (int64_t value : values) list.append(value);
  return nb::tuple(list);
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("(", absl::StrJoin(shape, ", "), shape.size() == 1 ? ",)" : ")");
}

}  // namespace

PythonTensorWriter::PythonTensorWriter(std::unique_ptr<TensorWriter> writer, std::string name,
                                       DLDataType dtype, std::vector<int64_t> shape)
    : name_(std::move(name)),
      dtype_(dtype),
      shape_(std::move(shape)),
      device_(writer->device()),
      nbytes_(writer->size()) {
  buffer_ = std::make_shared<WriterBuffer>();
  buffer_->shape = shape_;
  buffer_->strides = dlpack::CompactStrides(shape_);
  DLTensor& tensor = buffer_->tensor;
  tensor.data = writer->data();
  tensor.device = device_;
  tensor.ndim = static_cast<int32_t>(shape_.size());
  tensor.dtype = dtype_;
  tensor.shape = buffer_->shape.data();
  tensor.strides = buffer_->strides.data();
  buffer_->writer = std::move(writer);
}

const char* PythonTensorWriter::state() const {
  if (buffer_ != nullptr) return "open";
  return sealed_ ? "sealed" : "aborted";
}

const std::shared_ptr<WriterBuffer>& PythonTensorWriter::buffer() const {
  if (buffer_ == nullptr) {
    throw nb::value_error(absl::StrCat("tensord.TensorWriter '", name_, "' is already ", state(),
                                       "; it has no buffer any more")
                              .c_str());
  }
  return buffer_;
}

void PythonTensorWriter::CheckSealable(const char* call) const {
  const int64_t views = buffer()->live_views.load();
  if (views > 0) {
    throw nb::buffer_error(absl::StrCat(call, " of tensord.TensorWriter '", name_, "': ", views,
                                        " view(s) of its buffer (arrays from from_dlpack or "
                                        "np.frombuffer, memoryviews) are still "
                                        "alive, and sealing unmaps the buffer; delete them first, "
                                        "or fill it through a temporary "
                                        "(numpy.from_dlpack(writer)[...] = data)")
                               .c_str());
  }
}

std::unique_ptr<TensorWriter> PythonTensorWriter::TakeForSeal(const char* call) {
  CheckSealable(call);
  std::unique_ptr<TensorWriter> writer = std::move(buffer_->writer);
  buffer_.reset();
  sealed_ = true;
  return writer;
}

TensorInfo PythonTensorWriter::Seal(bool send_crc32c) {
  std::unique_ptr<TensorWriter> writer = TakeForSeal("seal()");
  absl::StatusOr<TensorInfo> info;
  {
    nb::gil_scoped_release released;
    info = writer->Seal(send_crc32c);
    writer.reset();  // aborts the create if the seal never reached the server
  }
  info_ = ValueOrThrow(std::move(info));
  return *info_;
}

void PythonTensorWriter::Abort() {
  std::shared_ptr<WriterBuffer> buffer = std::move(buffer_);
  if (buffer == nullptr) return;
  nb::gil_scoped_release released;
  buffer.reset();  // the abort goes now, or when the last view goes
}

DLDataType DtypeArgument(nb::handle dtype) {
  std::string text;
  if (nb::isinstance<nb::str>(dtype)) {
    text = nb::cast<std::string>(dtype);
  } else if (PyType_Check(dtype.ptr())) {
    // numpy scalar types (numpy.float32); Python's own float/int are
    // ambiguous about width, so they are refused below.
    const bool builtin = nb::hasattr(dtype, "__module__") &&
                         nb::cast<std::string>(nb::str(dtype.attr("__module__"))) == "builtins";
    if (!builtin) text = nb::cast<std::string>(nb::str(dtype.attr("__name__")));
  } else {
    // numpy.dtype('float32') prints "float32", torch.float32 "torch.float32".
    text = nb::cast<std::string>(nb::str(dtype));
    if (absl::StartsWith(text, "torch.")) text = text.substr(6);
  }
  if (text == "bool_") text = "bool";  // numpy 1.x's numpy.bool_
  absl::StatusOr<DLDataType> parsed = dlpack::ParseDataType(text);
  if (text.empty() || !parsed.ok()) {
    throw nb::value_error(
        absl::StrCat("dtype must be a tensord dtype name ('float32', 'bfloat16', 'int8', "
                     "'bool', ...), a numpy dtype or a torch dtype, got ",
                     Repr(dtype))
            .c_str());
  }
  return *parsed;
}

std::optional<DLDevice> DeviceArgument(nb::handle device) {
  if (device.is_none()) return std::nullopt;
  const std::string bad = absl::StrCat(
      "device must be None, 'cpu', 'cuda', 'cuda:N' or a DLPack (device_type, device_id) tuple "
      "((1, 0) or (2, N)), got ",
      Repr(device));
  DLDevice parsed{kDLCPU, 0};
  if (nb::isinstance<nb::str>(device)) {
    const std::string text = nb::cast<std::string>(device);
    int ordinal = 0;
    if (text == "cpu") {
      parsed = DLDevice{kDLCPU, 0};
    } else if (text == "cuda") {
      parsed = DLDevice{kDLCUDA, 0};
    } else if (absl::StartsWith(text, "cuda:") && absl::SimpleAtoi(text.substr(5), &ordinal) &&
               ordinal >= 0) {
      parsed = DLDevice{kDLCUDA, ordinal};
    } else {
      throw nb::value_error(bad.c_str());
    }
  } else if (nb::isinstance<nb::tuple>(device) && nb::len(device) == 2) {
    int type = 0, id = 0;
    if (!nb::try_cast(device[0], type, false) || !nb::try_cast(device[1], id, false) || id < 0 ||
        (type != kDLCPU && type != kDLCUDA) || (type == kDLCPU && id != 0)) {
      throw nb::value_error(bad.c_str());
    }
    parsed = DLDevice{static_cast<DLDeviceType>(type), id};
  } else {
    throw nb::value_error(bad.c_str());
  }
  if (parsed.device_type == kDLCPU) return std::nullopt;
  return parsed;
}

namespace {

// Buffer protocol (host writers): a writable, C-contiguous view of the
// buffer, typed by the dtype's struct code, or plain bytes ('B') for
// consumers that ask for no format and dtypes without a code.
struct BufferViewState {
  std::unique_ptr<WriterView> view;
  std::vector<Py_ssize_t> shape;
  std::vector<Py_ssize_t> strides;
  std::string format;
};

int GetWriterBuffer(PyObject* self, Py_buffer* view, int flags) {
  view->obj = nullptr;
  auto* writer = nb::inst_ptr<PythonTensorWriter>(nb::handle(self));
  if (!writer->open()) {
    PyErr_SetString(PyExc_BufferError,
                    absl::StrCat("tensord.TensorWriter '", writer->name(), "' is already ",
                                 writer->state(), "; it has no buffer any more")
                        .c_str());
    return -1;
  }
  if (writer->device().device_type != kDLCPU) {
    PyErr_SetString(PyExc_BufferError,
                    absl::StrCat("tensord.TensorWriter '", writer->name(),
                                 "' is in cuda:", writer->device().device_id,
                                 " memory, which the buffer protocol cannot show; use __dlpack__")
                        .c_str());
    return -1;
  }
  const std::shared_ptr<WriterBuffer>& buffer = writer->buffer();
  const char* format = StructFormatOf(writer->dtype());
  const bool typed = format != nullptr && (flags & (PyBUF_FORMAT | PyBUF_ND)) != 0;
  const bool multi_dim = typed && writer->shape().size() > 1;
  if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && multi_dim &&
      (flags & PyBUF_ANY_CONTIGUOUS) != PyBUF_ANY_CONTIGUOUS) {
    PyErr_SetString(PyExc_BufferError,
                    "tensord.TensorWriter buffers are C-contiguous, not Fortran-contiguous");
    return -1;
  }
  auto state = std::make_unique<BufferViewState>();
  state->view = std::make_unique<WriterView>(buffer);
  const Py_ssize_t itemsize =
      typed ? static_cast<Py_ssize_t>(dlpack::ElementBytes(writer->dtype())) : 1;
  if (typed) {
    state->format = format;
    for (size_t i = 0; i < writer->shape().size(); ++i) {
      state->shape.push_back(static_cast<Py_ssize_t>(writer->shape()[i]));
      state->strides.push_back(static_cast<Py_ssize_t>(buffer->strides[i]) * itemsize);
    }
  } else {
    state->format = "B";
    state->shape.push_back(static_cast<Py_ssize_t>(writer->nbytes()));
    state->strides.push_back(1);
  }
  view->buf = buffer->tensor.data;
  view->len = static_cast<Py_ssize_t>(writer->nbytes());
  view->readonly = 0;
  view->itemsize = itemsize;
  view->format = (flags & PyBUF_FORMAT) ? state->format.data() : nullptr;
  view->ndim = static_cast<int>(state->shape.size());
  view->shape = (flags & PyBUF_ND) ? state->shape.data() : nullptr;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? state->strides.data() : nullptr;
  view->suboffsets = nullptr;
  view->internal = state.release();
  view->obj = Py_NewRef(self);
  return 0;
}

void ReleaseWriterBuffer(PyObject*, Py_buffer* view) {
  delete static_cast<BufferViewState*>(view->internal);
}

PyType_Slot kWriterSlots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void*>(&GetWriterBuffer)},
    {Py_bf_releasebuffer, reinterpret_cast<void*>(&ReleaseWriterBuffer)},
    {0, nullptr},
};

std::string WriterRepr(const PythonTensorWriter& writer) {
  return absl::StrCat("tensord.TensorWriter(name='", writer.name(), "', dtype='",
                      dlpack::DataTypeName(writer.dtype()), "', shape=", ShapeText(writer.shape()),
                      ", device=(", static_cast<int>(writer.device().device_type), ", ",
                      writer.device().device_id, "), ", writer.state(), ")");
}

}  // namespace

void BindTensorWriter(nb::module_& m) {
  nb::class_<PythonTensorWriter>(
      m, "TensorWriter", nb::type_slots(kWriterSlots),
      "A buffer in the server's memory for a new version of a tensor (Client.create), filled in "
      "place: numpy.from_dlpack(writer), torch.from_dlpack(writer), memoryview(writer). seal() "
      "publishes it; abort(), or dropping it unsealed, gives it up. As a context manager it seals "
      "on a normal exit and aborts on an exception.")
      .def(
          "__dlpack__",
          [](const PythonTensorWriter& self, nb::handle stream, nb::handle max_version,
             nb::handle dl_device, nb::handle copy) {
            const ExportRequest request =
                ParseExportRequest(stream, max_version, dl_device, copy, self.device());
            const std::shared_ptr<WriterBuffer>& buffer = self.buffer();
            auto view = std::make_shared<const WriterView>(buffer);
            return ExportWritableCapsule(buffer->tensor, std::move(view), request,
                                         "a tensord.TensorWriter");
          },
          nb::kw_only(), "stream"_a = nb::none(), "max_version"_a = nb::none(),
          "dl_device"_a = nb::none(), "copy"_a = nb::none(),
          "A writable DLPack capsule over the buffer ('dltensor_versioned' when max_version >= (1, "
          "0)).")
      .def("__dlpack_device__",
           [](const PythonTensorWriter& self) {
             return nb::make_tuple(static_cast<int>(self.device().device_type),
                                   self.device().device_id);
           })
      .def("seal", &PythonTensorWriter::Seal, nb::kw_only(), "send_crc32c"_a = false,
           "Publishes the bytes as a new version and returns its TensorInfo. BufferError while "
           "views of "
           "the buffer are alive; the writer is finished afterwards, even when the seal fails.")
      .def("abort", &PythonTensorWriter::Abort,
           "Gives the create up: nothing is published. Idempotent; a no-op after seal().")
      .def_prop_ro("name", &PythonTensorWriter::name)
      .def_prop_ro(
          "dtype",
          [](const PythonTensorWriter& self) { return dlpack::DataTypeName(self.dtype()); })
      .def_prop_ro("shape", [](const PythonTensorWriter& self) { return IntTuple(self.shape()); })
      .def_prop_ro("nbytes", &PythonTensorWriter::nbytes)
      .def_prop_ro("device",
                   [](const PythonTensorWriter& self) {
                     return nb::make_tuple(static_cast<int>(self.device().device_type),
                                           self.device().device_id);
                   })
      .def_prop_ro("state", &PythonTensorWriter::state, "'open', 'sealed' or 'aborted'.")
      .def_prop_ro(
          "info", &PythonTensorWriter::info,
          "The published version's TensorInfo once sealed (also by a with block), else None.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def(
          "__exit__",
          [](PythonTensorWriter& self, nb::handle exc_type, nb::handle, nb::handle) {
            if (!self.open()) return false;  // sealed or aborted inside the block
            if (exc_type.is_none()) {
              self.Seal(false);
            } else {
              self.Abort();
            }
            return false;
          },
          "exc_type"_a.none(), "exc_value"_a.none(), "traceback"_a.none())
      .def("__repr__", &WriterRepr);
}

}  // namespace tensord::python
