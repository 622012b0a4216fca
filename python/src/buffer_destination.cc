#include "python/src/buffer_destination.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "python/src/buffer_format.h"
#include "service/dlpack/data_type.h"
#include "service/dlpack/tensor_layout.h"

namespace tensord::python {

namespace nb = nanobind;

void BufferDestination::Release::operator()(Py_buffer* view) const {
  PyBuffer_Release(view);
  delete view;
}

BufferDestination::BufferDestination(nb::handle object)
    : type_name_(nb::type_name(object.type()).c_str()) {
  if (!PyObject_CheckBuffer(object.ptr())) {
    throw nb::type_error(
        absl::StrCat("fetch_into needs a writable host array: an object with __dlpack__ "
                     "or the buffer protocol, got ",
                     type_name_)
            .c_str());
  }
  // Read-only is asked for, then checked, so that the message can say so.
  auto* view = new Py_buffer{};
  if (PyObject_GetBuffer(object.ptr(), view, PyBUF_FULL_RO) != 0) {
    delete view;
    throw nb::python_error();
  }
  view_.reset(view);
  if (view->readonly) {
    throw nb::value_error(
        absl::StrCat("fetch_into needs a writable buffer; the ", type_name_, " is read-only")
            .c_str());
  }
  if (view->suboffsets != nullptr) {
    throw nb::value_error(absl::StrCat("fetch_into cannot write the ", type_name_,
                                       ": its buffer is indirect (PIL-style suboffsets)")
                              .c_str());
  }
  const ParsedFormat format = ParseStructFormat(view->format, view->itemsize);
  if (!format.dtype.has_value()) {
    throw nb::value_error(
        absl::StrCat("fetch_into cannot write the ", type_name_, ": ", format.error).c_str());
  }
  for (int i = 0; i < view->ndim; ++i) {
    shape_.push_back(view->shape[i]);
    const Py_ssize_t stride = view->strides[i];
    if (stride % view->itemsize != 0) {
      throw nb::value_error(absl::StrCat("fetch_into cannot write the ", type_name_,
                                         ": its stride ", stride, " in dimension ", i,
                                         " is not a multiple of its itemsize ", view->itemsize)
                                .c_str());
    }
    strides_.push_back(stride / view->itemsize);
  }
  raw_bytes_ = format.is_byte && view->ndim == 1 && (shape_[0] <= 1 || strides_[0] == 1);
  typed_.data = view->buf;
  typed_.device = DLDevice{kDLCPU, 0};
  typed_.ndim = view->ndim;
  typed_.dtype = *format.dtype;
  typed_.shape = shape_.data();
  typed_.strides = strides_.data();
  typed_.byte_offset = 0;
}

absl::StatusOr<DLTensor> BufferDestination::RawTensorFor(const TensorInfo& info) {
  absl::StatusOr<uint64_t> bytes = dlpack::CompactByteSize(info.dtype, info.shape);
  if (!bytes.ok()) return bytes.status();
  if (*bytes != static_cast<uint64_t>(view_->len)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fetch_into: the ", type_name_, " holds ", view_->len, " bytes, but tensor '",
                     info.name, "' version ", info.version, " (", dlpack::DataTypeName(info.dtype),
                     ", shape (", absl::StrJoin(info.shape, ", "), ")) is ", *bytes, " bytes"));
  }
  raw_strides_ = dlpack::CompactStrides(info.shape);
  DLTensor tensor{};
  tensor.data = view_->buf;
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = static_cast<int32_t>(info.shape.size());
  tensor.dtype = info.dtype;
  tensor.shape = const_cast<int64_t*>(info.shape.data());
  tensor.strides = raw_strides_.data();
  return tensor;
}

}  // namespace tensord::python
