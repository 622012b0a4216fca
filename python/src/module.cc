// The _tensord extension: tensord.Client, tensord.Tensor, tensord.TensorInfo,
// tensord.BatchPutResult.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "python/src/arguments.h"
#include "python/src/batch_items.h"
#include "python/src/buffer_destination.h"
#include "python/src/dlpack_export.h"
#include "python/src/dlpack_import.h"
#include "python/src/status_error.h"
#include "python/src/tensor_writer.h"
#include "python/src/watch_events.h"
#include "service/common/build_info.h"
#include "service/dlpack/data_type.h"
#include "service/dlpack/tensor_layout.h"
#include "tensord/client.h"

namespace tensord::python {
namespace {

namespace nb = nanobind;
using namespace nb::literals;

nb::tuple IntTuple(const std::vector<int64_t>& values) {
  nb::list list;
  for (int64_t value : values) list.append(value);
  return nb::tuple(list);
}

// A fetched tensor as Python sees it; exports share its bytes.
class FetchedTensor {
 public:
  explicit FetchedTensor(Tensor tensor)
      : held_(std::make_shared<const HeldTensor>(std::move(tensor))) {}

  // ValueError once closed.
  const std::shared_ptr<const HeldTensor>& held() const {
    if (held_ == nullptr) {
      throw nb::value_error(
          "this tensord.Tensor is closed (its bytes were released by close() or a with block)");
    }
    return held_;
  }
  // Drops this object's hold on the bytes and the server's lease; arrays
  // already made from it with from_dlpack keep theirs until they are gone.
  void Close() { held_.reset(); }
  bool closed() const { return held_ == nullptr; }

 private:
  std::shared_ptr<const HeldTensor> held_;
};

// The Python Client: a tensord::Client whose network calls run without the GIL.
class PythonClient {
 public:
  PythonClient(std::string server, const std::string& path, std::optional<double> timeout_seconds,
               std::string handoff_socket) {
    ClientOptions options;
    options.server = std::move(server);
    options.path = PathArgument(path);
    if (timeout_seconds.has_value()) {
      if (!(*timeout_seconds > 0)) {
        throw nb::value_error(
            absl::StrCat("timeout must be None or positive seconds, got ", *timeout_seconds)
                .c_str());
      }
      options.timeout = absl::Seconds(*timeout_seconds);
    }
    options.handoff_socket = std::move(handoff_socket);
    client_ = ValueOrThrow(Client::Connect(options));
  }

  FetchedTensor Fetch(const std::string& name, std::optional<int64_t> version, bool read_only,
                      bool verify_crc32c, bool device_to_host) {
    FetchOptions options;
    options.version = VersionArgument(version);
    options.read_only = read_only;
    options.verify_crc32c = verify_crc32c;
    // A device tensor over the local handoff is imported as device memory
    // (exported as kDLCUDA) unless a host copy is asked for; the C++ client
    // copies over gRPC when this process cannot import it (path 'auto').
    options.device_to_host = device_to_host;
    absl::StatusOr<Tensor> tensor;
    {
      nb::gil_scoped_release released;
      tensor = client_->Fetch(name, options);
    }
    return FetchedTensor(ValueOrThrow(std::move(tensor)));
  }

  TensorInfo Put(const std::string& name, nb::handle producer, bool send_crc32c, uint32_t replicas,
                 uint32_t streams) {
    ImportedTensor imported = ImportDlpack(producer, "put");
    PutOptions options;
    options.send_crc32c = send_crc32c;
    options.replicas = replicas;
    options.streams = streams;
    absl::StatusOr<TensorInfo> info;
    {
      // The imported tensor keeps the producer's memory alive meanwhile.
      nb::gil_scoped_release released;
      info = client_->Put(name, imported.dl_tensor(), options);
    }
    return ValueOrThrow(std::move(info));
  }

  // Copies the tensor into `destination`: a writable host array with
  // __dlpack__ (numpy, torch; any strides) of the stored dtype and shape, or
  // an object with the writable buffer protocol (bytearray, array.array,
  // memoryview, mmap), typed by its format, or raw bytes (BufferDestination).
  TensorInfo FetchInto(const std::string& name, nb::handle destination,
                       std::optional<int64_t> version, bool verify_crc32c) {
    FetchOptions options;
    options.version = VersionArgument(version);
    options.verify_crc32c = verify_crc32c;
    if (!nb::hasattr(destination, "__dlpack__")) return FetchIntoBuffer(name, destination, options);
    ImportedTensor imported = ImportDlpack(destination, "fetch_into");
    if (imported.read_only()) {
      throw nb::value_error(absl::StrCat("fetch_into needs a writable array; the ",
                                         nb::type_name(destination.type()).c_str(), " is read-only")
                                .c_str());
    }
    absl::StatusOr<TensorInfo> info;
    {
      // The imported tensor keeps the destination's memory alive meanwhile.
      nb::gil_scoped_release released;
      info = client_->FetchInto(name, imported.dl_tensor(), options);
    }
    return ValueOrThrow(std::move(info));
  }

  // A zero-copy writer for a new version of `name` (local handoff only).
  PythonTensorWriter Create(const std::string& name, nb::handle dtype,
                            const std::vector<int64_t>& shape, const std::string& retention,
                            nb::handle device, uint32_t replicas) {
    const DLDataType parsed_dtype = DtypeArgument(dtype);
    CreateOptions options;
    options.retention = RetentionArgument(retention);
    options.device = DeviceArgument(device);
    options.replicas = replicas;
    absl::StatusOr<std::unique_ptr<TensorWriter>> writer;
    {
      nb::gil_scoped_release released;
      writer = client_->Create(name, parsed_dtype, shape, options);
    }
    if (!writer.ok() && writer.status().code() == absl::StatusCode::kUnavailable &&
        !client_->local()) {
      throw StatusError(absl::UnavailableError(absl::StrCat(
          "create needs the local handoff, and this Client talks gRPC only (path='remote', or no "
          "handoff socket reachable from this host): connect with path='local' to a tensord on "
          "this "
          "host that runs with a --handoff-socket (",
          writer.status().message(), ")")));
    }
    return PythonTensorWriter(ValueOrThrow(std::move(writer)), name, parsed_dtype, shape);
  }

  // Seals writers of this client as one atomic group; every writer is
  // finished afterwards, whether or not the group was published.
  SealGroupResult SealGroup(nb::handle writers, bool send_crc32c) {
    std::vector<PythonTensorWriter*> python_writers;
    for (nb::handle item : nb::iter(writers)) {
      PythonTensorWriter* writer = nullptr;
      if (!nb::try_cast(item, writer, false) || writer == nullptr) {
        throw nb::type_error(absl::StrCat("seal_group takes tensord.TensorWriter objects, got ",
                                          nb::type_name(item.type()).c_str(), " at index ",
                                          python_writers.size())
                                 .c_str());
      }
      for (size_t i = 0; i < python_writers.size(); ++i) {
        if (python_writers[i] == writer) {
          throw nb::value_error(absl::StrCat("seal_group got the writer of '", writer->name(),
                                             "' twice (indexes ", i, " and ", python_writers.size(),
                                             ")")
                                    .c_str());
        }
      }
      python_writers.push_back(writer);
    }
    // Every writer is checked before any is taken, so a refusal leaves them all open.
    for (PythonTensorWriter* writer : python_writers) writer->CheckSealable("seal_group");
    std::vector<std::unique_ptr<TensorWriter>> taken;
    for (PythonTensorWriter* writer : python_writers)
      taken.push_back(writer->TakeForSeal("seal_group"));
    absl::StatusOr<SealGroupResult> sealed;
    {
      nb::gil_scoped_release released;
      sealed = client_->SealGroup(taken, send_crc32c);
      taken.clear();  // aborts whatever the group did not publish
    }
    SealGroupResult published = ValueOrThrow(std::move(sealed));
    for (size_t i = 0; i < published.items.size() && i < python_writers.size(); ++i) {
      python_writers[i]->set_info(published.items[i]);
    }
    return published;
  }

  // Throwing while the GIL is released is fine: unwinding re-acquires it
  // before nanobind translates the exception.
  TensorInfo Stat(const std::string& name, std::optional<int64_t> version) {
    const uint64_t wanted = VersionArgument(version);
    nb::gil_scoped_release released;
    return ValueOrThrow(client_->Stat(name, wanted));
  }

  std::vector<TensorInfo> List(const std::string& prefix, bool cluster) {
    nb::gil_scoped_release released;
    if (!cluster) return ValueOrThrow(client_->ListAll(prefix));
    std::vector<TensorInfo> all;
    std::string token;
    do {
      ListResult page = ValueOrThrow(client_->ListCluster(prefix, 1000, token));
      for (TensorInfo& info : page.tensors) all.push_back(std::move(info));
      token = std::move(page.next_page_token);
    } while (!token.empty());
    return all;
  }

  uint64_t Delete(const std::string& name, std::optional<int64_t> version) {
    const uint64_t wanted = VersionArgument(version);
    nb::gil_scoped_release released;
    return ValueOrThrow(client_->Delete(name, wanted));
  }

  PythonBatchPutResult BatchPut(nb::handle items, bool atomic, const std::string& retention,
                                bool send_crc32c) {
    ImportedBatch batch = ImportBatchPutItems(items, RetentionArgument(retention));
    BatchPutOptions options;
    options.atomic = atomic;
    options.send_crc32c = send_crc32c;
    absl::StatusOr<BatchPutResult> result;
    {
      // The imported tensors keep the producers' memory alive meanwhile.
      nb::gil_scoped_release released;
      result = client_->BatchPut(batch.items, options);
    }
    return PythonBatchPutResult(ValueOrThrow(std::move(result)), batch.items);
  }

  // One entry per ref, in order: a Tensor, or the tensord.Error of that item.
  nb::list BatchFetch(nb::handle refs, bool verify_crc32c, bool device_to_host) {
    const std::vector<TensorRef> wanted = TensorRefsArgument(refs);
    absl::StatusOr<std::vector<absl::StatusOr<Tensor>>> fetched;
    {
      nb::gil_scoped_release released;
      fetched = client_->BatchFetch(wanted, BatchFetchOptions(verify_crc32c, device_to_host));
    }
    nb::list tensors;
    for (absl::StatusOr<Tensor>& tensor : ValueOrThrow(std::move(fetched))) {
      tensors.append(tensor.ok() ? nb::cast(FetchedTensor(*std::move(tensor)))
                                 : StatusErrorObject(tensor.status()));
    }
    return tensors;
  }

  std::vector<FetchedTensor> BatchFetchPrefix(const std::string& prefix, bool verify_crc32c,
                                              bool device_to_host) {
    absl::StatusOr<std::vector<Tensor>> fetched;
    {
      nb::gil_scoped_release released;
      fetched = client_->BatchFetchPrefix(prefix, BatchFetchOptions(verify_crc32c, device_to_host));
    }
    return WrapAll(ValueOrThrow(std::move(fetched)));
  }

  std::vector<FetchedTensor> BatchFetchGroup(int64_t group_version, bool verify_crc32c,
                                             bool device_to_host) {
    if (group_version < 1) {
      throw nb::value_error(
          absl::StrCat("group_version must be a positive int, got ", group_version).c_str());
    }
    absl::StatusOr<std::vector<Tensor>> fetched;
    {
      nb::gil_scoped_release released;
      fetched = client_->BatchFetchGroup(static_cast<uint64_t>(group_version),
                                         BatchFetchOptions(verify_crc32c, device_to_host));
    }
    return WrapAll(ValueOrThrow(std::move(fetched)));
  }

  std::vector<FetchedTensor> BatchFetchClusterGroup(int64_t cluster_group, bool verify_crc32c,
                                                    bool device_to_host) {
    if (cluster_group < 1) {
      throw nb::value_error(
          absl::StrCat("cluster_group must be a positive int, got ", cluster_group).c_str());
    }
    absl::StatusOr<std::vector<Tensor>> fetched;
    {
      nb::gil_scoped_release released;
      fetched = client_->BatchFetchClusterGroup(static_cast<uint64_t>(cluster_group),
                                                BatchFetchOptions(verify_crc32c, device_to_host));
    }
    return WrapAll(ValueOrThrow(std::move(fetched)));
  }

  // fetch_into for buffer-protocol destinations (BufferDestination).
  TensorInfo FetchIntoBuffer(const std::string& name, nb::handle destination,
                             const FetchOptions& options) {
    BufferDestination buffer(destination);
    if (!buffer.raw_bytes()) {
      absl::StatusOr<TensorInfo> info;
      {
        nb::gil_scoped_release released;
        info = client_->FetchInto(name, buffer.typed(), options);
      }
      return ValueOrThrow(std::move(info));
    }
    // Raw bytes take the stored dtype and shape: stat, then fetch exactly
    // that version. When the latest version was replaced and freed in
    // between, the new latest is tried (a bounded number of times).
    constexpr int kRawAttempts = 3;
    absl::StatusOr<TensorInfo> info;
    for (int attempt = 0; attempt < kRawAttempts; ++attempt) {
      nb::gil_scoped_release released;
      absl::StatusOr<TensorInfo> stored = client_->Stat(name, options.version);
      if (!stored.ok()) {
        info = stored.status();
        break;
      }
      absl::StatusOr<DLTensor> raw = buffer.RawTensorFor(*stored);
      if (!raw.ok()) {
        info = raw.status();
        break;
      }
      FetchOptions pinned = options;
      pinned.version = stored->version;
      info = client_->FetchInto(name, *raw, pinned);
      if (info.ok() || options.version != 0 || info.status().code() != absl::StatusCode::kNotFound)
        break;
    }
    return ValueOrThrow(std::move(info));
  }

  // The call starts before this returns (a refusal raises here).
  PythonWatch Watch(nb::handle self, const std::string& prefix, std::optional<int64_t> from_version,
                    bool send_existing, size_t max_buffered_events, bool cluster) {
    WatchOptions options;
    options.cluster = cluster;
    options.from_version = VersionArgument(from_version);
    options.send_existing = send_existing;
    options.max_buffered_events = max_buffered_events;
    absl::StatusOr<std::unique_ptr<WatchStream>> stream;
    {
      nb::gil_scoped_release released;
      stream = client_->Watch(prefix, options);
    }
    return PythonWatch(ValueOrThrow(std::move(stream)), nb::borrow(self));
  }

  std::string Health(const std::string& service) {
    nb::gil_scoped_release released;
    return ValueOrThrow(client_->Health(service));
  }

  bool local() const { return client_->local(); }

 private:
  static FetchOptions BatchFetchOptions(bool verify_crc32c, bool device_to_host) {
    FetchOptions options;
    options.verify_crc32c = verify_crc32c;
    options.device_to_host = device_to_host;  // as in Fetch
    return options;
  }

  static std::vector<FetchedTensor> WrapAll(std::vector<Tensor> tensors) {
    std::vector<FetchedTensor> wrapped;
    wrapped.reserve(tensors.size());
    for (Tensor& tensor : tensors) wrapped.emplace_back(std::move(tensor));
    return wrapped;
  }

  std::unique_ptr<Client> client_;
};

std::string InfoRepr(const TensorInfo& info) {
  std::string shape;
  for (size_t i = 0; i < info.shape.size(); ++i)
    absl::StrAppend(&shape, i ? ", " : "", info.shape[i]);
  if (info.shape.size() == 1) shape += ",";
  return absl::StrCat("TensorInfo(name='", info.name, "', version=", info.version, ", dtype='",
                      dlpack::DataTypeName(info.dtype), "', shape=(", shape,
                      "), total_bytes=", info.total_bytes, ", open_leases=", info.open_leases, ")");
}

void BindTensorInfo(nb::module_& m) {
  nb::class_<TensorInfo>(m, "TensorInfo", "What the server knows about one version of a tensor.")
      .def_prop_ro("name", [](const TensorInfo& i) { return i.name; })
      .def_prop_ro("version", [](const TensorInfo& i) { return i.version; })
      .def_prop_ro(
          "dtype", [](const TensorInfo& i) { return dlpack::DataTypeName(i.dtype); },
          "Canonical dtype name: 'float32', 'bfloat16', 'bool', 'int8', ...")
      .def_prop_ro(
          "dlpack_dtype",
          [](const TensorInfo& i) {
            return nb::make_tuple(i.dtype.code, i.dtype.bits, i.dtype.lanes);
          },
          "The DLPack (code, bits, lanes).")
      .def_prop_ro("shape", [](const TensorInfo& i) { return IntTuple(i.shape); })
      .def_prop_ro(
          "strides", [](const TensorInfo& i) { return IntTuple(i.strides); },
          "In elements, always filled.")
      .def_prop_ro("byte_offset", [](const TensorInfo& i) { return i.byte_offset; })
      .def_prop_ro("device",
                   [](const TensorInfo& i) {
                     return nb::make_tuple(static_cast<int>(i.device.device_type),
                                           i.device.device_id);
                   })
      .def_prop_ro("total_bytes", [](const TensorInfo& i) { return i.total_bytes; })
      .def_prop_ro("crc32c", [](const TensorInfo& i) { return i.crc32c; })
      .def_prop_ro(
          "created",
          [](const TensorInfo& i) { return absl::ToDoubleSeconds(i.created - absl::UnixEpoch()); },
          "Publication time, seconds since the Unix epoch.")
      .def_prop_ro(
          "open_leases", [](const TensorInfo& i) { return i.open_leases; },
          "Open leases (in-flight fetches and local handoffs) on this version.")
      .def_prop_ro(
          "retention", [](const TensorInfo& i) { return std::string(RetentionName(i.retention)); },
          "'default', 'pinned' or 'cache' (evictable).")
      .def_ro("node", &TensorInfo::node,
              "Cluster listings and watches: the node that took the version's put; '' "
              "otherwise.")
      .def("__repr__", &InfoRepr);
}

void BindTensor(nb::module_& m) {
  nb::class_<FetchedTensor>(
      m, "Tensor",
      "A fetched tensor. Hand it to any DLPack consumer (torch.from_dlpack, "
      "numpy.from_dlpack, jax.dlpack.from_dlpack); its bytes and the server's "
      "lease live until this object and every consumer's tensor are gone.")
      .def(
          "__dlpack__",
          [](const FetchedTensor& self, nb::handle stream, nb::handle max_version,
             nb::handle dl_device, nb::handle copy) {
            const std::shared_ptr<const HeldTensor>& held = self.held();
            return ExportCapsule(
                held, ParseExportRequest(stream, max_version, dl_device, copy, held->device()));
          },
          nb::kw_only(), "stream"_a = nb::none(), "max_version"_a = nb::none(),
          "dl_device"_a = nb::none(), "copy"_a = nb::none(),
          "A DLPack capsule: 'dltensor_versioned' when max_version >= (1, 0), 'dltensor' "
          "otherwise.")
      .def(
          "__dlpack_device__",
          [](const FetchedTensor& self) {
            const DLDevice device = self.held()->device();
            return nb::make_tuple(static_cast<int>(device.device_type), device.device_id);
          },
          "(1, 0) for host memory; (2, N) for a device tensor imported over the local handoff.")
      .def_prop_ro("info", [](const FetchedTensor& self) { return self.held()->info(); })
      .def_prop_ro("name", [](const FetchedTensor& self) { return self.held()->info().name; })
      .def_prop_ro("version", [](const FetchedTensor& self) { return self.held()->info().version; })
      .def_prop_ro(
          "dtype",
          [](const FetchedTensor& self) { return dlpack::DataTypeName(self.held()->info().dtype); })
      .def_prop_ro("shape",
                   [](const FetchedTensor& self) { return IntTuple(self.held()->info().shape); })
      .def_prop_ro(
          "read_only", [](const FetchedTensor& self) { return self.held()->read_only(); },
          "True for a shared read-only mapping of the server's bytes (fetch(read_only=True)).")
      .def_prop_ro(
          "is_copy", [](const FetchedTensor& self) { return self.held()->is_copy(); },
          "True when the bytes are this process's own copy (a remote fetch), False for a "
          "mapping of the server's bytes (the local handoff).")
      .def("close", &FetchedTensor::Close,
           "Releases this object's hold on the bytes (and, once every array made from it is gone, "
           "the server's lease). Idempotent; the Tensor is unusable afterwards.")
      .def_prop_ro("closed", &FetchedTensor::closed)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def(
          "__exit__",
          [](FetchedTensor& self, nb::handle, nb::handle, nb::handle) {
            self.Close();
            return false;
          },
          "exc_type"_a.none(), "exc_value"_a.none(), "traceback"_a.none())
      .def("__repr__", [](const FetchedTensor& self) {
        if (self.closed()) return std::string("tensord.Tensor(closed)");
        const TensorInfo& info = self.held()->info();
        return absl::StrCat("tensord.Tensor(name='", info.name, "', version=", info.version,
                            ", dtype='", dlpack::DataTypeName(info.dtype),
                            "', shape=", nb::repr(IntTuple(info.shape)).c_str(), ")");
      });
}

void BindClient(nb::module_& m) {
  nb::class_<PythonClient>(m, "Client", "A connection to a tensord server. Thread-safe.")
      .def(nb::init<std::string, const std::string&, std::optional<double>, std::string>(),
           "server"_a, nb::kw_only(), "path"_a = "auto", "timeout"_a = nb::none(),
           "handoff_socket"_a = "",
           "server: 'host:port', 'unix:PATH' or any gRPC target. path: 'auto' (local handoff when "
           "the "
           "server's handoff socket is reachable on this host), 'remote' or 'local'. timeout: "
           "seconds "
           "per call. handoff_socket: override the socket the server advertises.")
      .def(
          "fetch", &PythonClient::Fetch, "name"_a, "version"_a = nb::none(), nb::kw_only(),
          "read_only"_a = false, "verify_crc32c"_a = false, "device_to_host"_a = false,
          "The tensor `name` (latest version, or `version`) as a tensord.Tensor. A tensor the "
          "server "
          "keeps in device memory comes over the local handoff as device memory (__dlpack_device__ "
          "(2, N)) when this process can import it, as a host copy otherwise or with "
          "device_to_host=True.")
      .def(
          "fetch_into", &PythonClient::FetchInto, "name"_a, "array"_a, "version"_a = nb::none(),
          nb::kw_only(), "verify_crc32c"_a = false,
          "Copies the tensor into `array`: any writable host array with __dlpack__ (numpy, torch), "
          "any strides, of the stored dtype and shape (tensord.Error INVALID_ARGUMENT otherwise), "
          "or a "
          "writable buffer-protocol object (bytearray, array.array, memoryview, mmap) typed by its "
          "format; a 1-D byte buffer ('B', 'b', 'c') of exactly the tensor's size takes its bytes "
          "in "
          "row-major order. Returns its TensorInfo.")
      .def(
          "create", &PythonClient::Create, "name"_a, "dtype"_a, "shape"_a, nb::kw_only(),
          "retention"_a = "default", "device"_a = nb::none(), "replicas"_a = 0,
          "A tensord.TensorWriter: a buffer in the server's memory for a new version of `name`, "
          "filled in place, published by seal(). Needs the local handoff (tensord.Error "
          "UNAVAILABLE "
          "otherwise). dtype: 'float32', a numpy or torch dtype. retention: 'default', 'pinned' or "
          "'cache'. device: None (host memory), 'cuda:N' or (2, N) for device memory of the "
          "server's "
          "device backend. replicas=N (in a cluster): seal() returns once N nodes hold the "
          "version; "
          "0 takes the server's default for the name.")
      .def("seal_group", &PythonClient::SealGroup, "writers"_a, nb::kw_only(),
           "send_crc32c"_a = false,
           "Seals writers of this client's create as one atomic group: every version is published "
           "under one version number at once, or none is. Returns a SealGroupResult: their "
           "TensorInfos "
           "in order (it is a sequence of them), the group_version and, in a cluster, the "
           "cluster_group; every writer is finished afterwards either way.")
      .def("put", &PythonClient::Put, "name"_a, "tensor"_a, nb::kw_only(), "send_crc32c"_a = false,
           "replicas"_a = 0, "streams"_a = 0,
           "Publishes any object with __dlpack__ (host memory, any strides) as a new version. "
           "replicas=N (in a cluster): acknowledged once N nodes hold it; 0 takes the server's "
           "default for the name. streams=N (1..8): a large remote put in N concurrent streams; "
           "0 chooses from the size (one per 64 MiB, up to 4).")
      .def("stat", &PythonClient::Stat, "name"_a, "version"_a = nb::none())
      .def("list", &PythonClient::List, "prefix"_a = "", nb::kw_only(), "cluster"_a = false,
           "TensorInfo of every name starting with prefix. cluster=True (in a cluster): every "
           "durable name, from the cluster's etcd name records (cache names are not listed), "
           "with only name, version (the record's etcd revision, not a node's number), "
           "total_bytes, crc32c and TensorInfo.node (the node that took the put) known.")
      .def("delete", &PythonClient::Delete, "name"_a, "version"_a = nb::none(),
           "Removes `name` (only while at `version`, when given); returns the removed version.")
      .def("batch_put", &PythonClient::BatchPut, "items"_a, nb::kw_only(), "atomic"_a = false,
           "retention"_a = "default", "send_crc32c"_a = false,
           "Publishes many tensors in few calls. items: a mapping of name to tensor, or (name, "
           "tensor) pairs; tensors as put takes them. Each item publishes or fails on its own "
           "(BatchPutResult.items); atomic=True publishes every item under one version "
           "(BatchPutResult.group_version) or none of them. retention: 'default', 'pinned' or "
           "'cache' (evictable), for every item. Raises tensord.Error only when the batch as a "
           "whole is refused (a bad name, an atomic batch over MAX_BATCH_ITEMS, the server "
           "unreachable).")
      .def("batch_fetch", &PythonClient::BatchFetch, "items"_a, nb::kw_only(),
           "verify_crc32c"_a = false, "device_to_host"_a = false,
           "Many tensors, leased at one moment on the server. items: names (latest version) or "
           "(name, version) pairs. Returns one entry per item, in order: a tensord.Tensor, or the "
           "tensord.Error of that item (not raised).")
      .def("batch_fetch_prefix", &PythonClient::BatchFetchPrefix, "prefix"_a, nb::kw_only(),
           "verify_crc32c"_a = false, "device_to_host"_a = false,
           "The latest version of every name starting with prefix, in name order, from one moment; "
           "tensord.Error OUT_OF_RANGE when more than MAX_BATCH_ITEMS match.")
      .def(
          "batch_fetch_group", &PythonClient::BatchFetchGroup, "group_version"_a, nb::kw_only(),
          "verify_crc32c"_a = false, "device_to_host"_a = false,
          "Every item of the atomic batch published as group_version, in name order; tensord.Error "
          "NOT_FOUND when any of them is gone.")
      .def(
          "batch_fetch_cluster_group", &PythonClient::BatchFetchClusterGroup, "cluster_group"_a,
          nb::kw_only(), "verify_crc32c"_a = false, "device_to_host"_a = false,
          "In a cluster: every item of the atomic batch of durable names ordered at cluster_group "
          "(BatchPutResult.cluster_group, or a cluster watch event's version), through any node, "
          "in name order; tensord.Error NOT_FOUND when an item moved on since, FAILED_PRECONDITION "
          "on a single node.")
      .def(
          "watch",
          [](nb::handle self, const std::string& prefix, std::optional<int64_t> from_version,
             bool send_existing, size_t max_buffered_events, bool cluster) {
            return nb::cast<PythonClient&>(self).Watch(self, prefix, from_version, send_existing,
                                                       max_buffered_events, cluster);
          },
          "prefix"_a = "", nb::kw_only(), "from_version"_a = nb::none(), "send_existing"_a = false,
          "max_buffered_events"_a = 4096, "cluster"_a = false,
          "A tensord.Watch of the changes to names starting with prefix, in the server's order: "
          "an event per publish (an atomic group is one event), delete and eviction. "
          "send_existing=True first sends the latest version of each matching name; "
          "from_version=V resumes after V (Watch.position of an earlier watch). A watcher that "
          "fell further behind than the server's history gets a 'fell_behind' event naming what "
          "it may have missed. cluster=True (in a cluster): every node's durable publishes and "
          "deletes (cache puts are not seen), positioned by etcd revision, published items naming "
          "the node that took the put.")
      .def("health", &PythonClient::Health, "service"_a = "",
           "The server's grpc.health.v1 status: 'SERVING', 'NOT_SERVING', ...")
      .def_prop_ro("local", &PythonClient::local, "True when calls take the local handoff path.");
}

}  // namespace
}  // namespace tensord::python

NB_MODULE(_tensord, m) {
  using namespace tensord::python;
  m.doc() = "tensord's native client (import tensord instead).";
  RegisterStatusErrorTranslator(m);
  BindTensorInfo(m);
  BindTensor(m);
  BindBatchPutResult(m);
  BindSealGroupResult(m);
  BindTensorWriter(m);
  BindWatch(m);
  BindClient(m);
  m.attr("MAX_BATCH_ITEMS") = tensord::kMaxBatchItems;
  m.def("tune_malloc_for_transfers", &tensord::TuneMallocForTransfers,
        "For a program that moves large tensors, once: keeps up to 64 MiB of freed heap per "
        "malloc arena for gRPC's next receive buffers instead of returning it to the kernel "
        "(C++: tensord::TuneMallocForTransfers). Process-wide; glibc only.");
  m.attr("__version__") = std::string(tensord::ReleaseVersion());
  m.def(
      "build_info",
      [] {
        nb::dict info;
        info["version"] = std::string(tensord::ReleaseVersion());
        info["commit"] = std::string(tensord::GitCommit());
        info["cuda"] = tensord::CudaBuiltIn();
        return info;
      },
      "{'version', 'commit', 'cuda'}: the client this module was built from (cuda: whether its "
      "CUDA backend is compiled in).");
  m.def(
      "_export_counters",
      [] {
        const ExportCounters counters = ReadExportCounters();
        return nb::make_tuple(counters.exported, counters.deleted);
      },
      "(capsules exported, DLPack deleters run on them): for tests of the deleter contract.");
}
