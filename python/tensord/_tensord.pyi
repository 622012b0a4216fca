"""Type stubs of tensord's native module (import tensord instead)."""

from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from tensord import Error

__version__: str
MAX_BATCH_ITEMS: int

class TensorInfo:
    """What the server knows about one version of a tensor."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def dtype(self) -> str:
        """Canonical dtype name: 'float32', 'bfloat16', 'bool', 'int8', ..."""
    @property
    def dlpack_dtype(self) -> Tuple[int, int, int]:
        """The DLPack (code, bits, lanes)."""
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def strides(self) -> Tuple[int, ...]:
        """In elements, always filled."""
    @property
    def byte_offset(self) -> int: ...
    @property
    def device(self) -> Tuple[int, int]: ...
    @property
    def total_bytes(self) -> int: ...
    @property
    def crc32c(self) -> int: ...
    @property
    def created(self) -> float:
        """Publication time, seconds since the Unix epoch."""
    @property
    def open_leases(self) -> int: ...
    @property
    def retention(self) -> str:
        """'default', 'pinned' or 'cache' (evictable)."""
    @property
    def node(self) -> str:
        """Cluster listings and watches: the node holding the version; '' otherwise."""

class Tensor:
    """A fetched tensor; hand it to any DLPack consumer (torch.from_dlpack,
    numpy.from_dlpack, jax.dlpack.from_dlpack). Usable as a context manager:
    leaving the block closes it."""

    def __dlpack__(
        self,
        *,
        stream: Optional[Any] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]:
        """(1, 0) for host memory; (2, N) for a device tensor imported over the local handoff."""
    @property
    def info(self) -> TensorInfo: ...
    @property
    def name(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def is_copy(self) -> bool: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> "Tensor": ...
    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> bool: ...

class TensorWriter:
    """A buffer in the server's memory for a new version of a tensor
    (Client.create), filled in place through __dlpack__ or (host writers)
    the writable buffer protocol. seal() publishes it; abort(), or dropping
    it unsealed, gives it up. As a context manager it seals on a normal exit
    and aborts on an exception."""

    def __dlpack__(
        self,
        *,
        stream: Optional[Any] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    def __buffer__(self, flags: int) -> memoryview: ...
    def seal(self, *, send_crc32c: bool = False) -> TensorInfo:
        """Publishes the bytes; BufferError while views of the buffer are alive.
        The writer is finished afterwards, even when the seal fails."""
    def abort(self) -> None:
        """Gives the create up; idempotent, a no-op after seal()."""
    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def device(self) -> Tuple[int, int]: ...
    @property
    def state(self) -> str:
        """'open', 'sealed' or 'aborted'."""
    @property
    def info(self) -> Optional[TensorInfo]:
        """The published version's TensorInfo once sealed, else None."""
    def __enter__(self) -> "TensorWriter": ...
    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> bool: ...

class SealGroupResult:
    """What seal_group published: every writer's TensorInfo, in order, all
    under one version. A sequence of those TensorInfos too."""

    @property
    def items(self) -> List[TensorInfo]:
        """The TensorInfos, in the writers' order."""
    @property
    def group_version(self) -> int:
        """The version every item has (for batch_fetch_group)."""
    @property
    def cluster_group(self) -> Optional[int]:
        """In a cluster, a group of durable names: the etcd revision that
        ordered it (for batch_fetch_cluster_group on any node); None otherwise."""
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> TensorInfo: ...
    def __iter__(self) -> Iterator[TensorInfo]: ...

class BatchPutResult:
    """What a batch_put did: per item, in order, its TensorInfo or the
    tensord.Error that says why it was not published."""

    @property
    def items(self) -> List[Union[TensorInfo, Error]]:
        """One entry per item, in order: a TensorInfo, or a tensord.Error (not raised)."""
    @property
    def group_version(self) -> Optional[int]:
        """The version every item of a published atomic batch has; None for a
        plain batch or a refused atomic one."""
    @property
    def cluster_group(self) -> Optional[int]:
        """In a cluster, a published atomic batch of durable names: the etcd
        revision that ordered it (for batch_fetch_cluster_group on any node);
        None otherwise."""
    @property
    def ok(self) -> bool:
        """True when every item was published."""
    @property
    def errors(self) -> List[Tuple[str, Error]]:
        """(name, tensord.Error) of the items not published, in order."""

class WatchEvent:
    """One change under a watched prefix."""

    @property
    def kind(self) -> str:
        """'published', 'deleted', 'evicted' or 'fell_behind'."""
    @property
    def version(self) -> int: ...
    @property
    def items(self) -> List[TensorInfo]: ...
    @property
    def atomic_group(self) -> bool: ...
    @property
    def existing(self) -> bool: ...
    @property
    def missed_after(self) -> int: ...

class Watch:
    """The changes under a prefix as they happen (Client.watch)."""

    def next(self, timeout: Optional[float] = None) -> Optional[WatchEvent]: ...
    def __iter__(self) -> "Watch": ...
    def __next__(self) -> WatchEvent: ...
    @property
    def position(self) -> int: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> "Watch": ...
    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> bool: ...

class Client:
    """A connection to a tensord server. Thread-safe."""

    def __init__(
        self,
        server: str,
        *,
        path: str = "auto",
        timeout: Optional[float] = None,
        handoff_socket: str = "",
    ) -> None: ...
    def fetch(
        self,
        name: str,
        version: Optional[int] = None,
        *,
        read_only: bool = False,
        verify_crc32c: bool = False,
        device_to_host: bool = False,
    ) -> Tensor: ...
    def fetch_into(
        self, name: str, array: Any, version: Optional[int] = None, *, verify_crc32c: bool = False
    ) -> TensorInfo: ...
    def create(
        self,
        name: str,
        dtype: Any,
        shape: Sequence[int],
        *,
        retention: str = "default",
        device: Union[None, str, Tuple[int, int]] = None,
        replicas: int = 0,
    ) -> TensorWriter: ...
    def seal_group(self, writers: Iterable[TensorWriter], *, send_crc32c: bool = False) -> SealGroupResult: ...
    def put(
        self, name: str, tensor: Any, *, send_crc32c: bool = False, replicas: int = 0, streams: int = 0
    ) -> TensorInfo: ...
    def stat(self, name: str, version: Optional[int] = None) -> TensorInfo: ...
    def list(self, prefix: str = "", *, cluster: bool = False) -> List[TensorInfo]: ...
    def delete(self, name: str, version: Optional[int] = None) -> int: ...
    def batch_put(
        self,
        items: Union[Mapping[str, Any], Iterable[Tuple[str, Any]]],
        *,
        atomic: bool = False,
        retention: str = "default",
        send_crc32c: bool = False,
    ) -> BatchPutResult: ...
    def batch_fetch(
        self,
        items: Iterable[Union[str, Tuple[str, Optional[int]]]],
        *,
        verify_crc32c: bool = False,
        device_to_host: bool = False,
    ) -> List[Union[Tensor, Error]]: ...
    def batch_fetch_prefix(
        self, prefix: str, *, verify_crc32c: bool = False, device_to_host: bool = False
    ) -> List[Tensor]: ...
    def batch_fetch_group(
        self, group_version: int, *, verify_crc32c: bool = False, device_to_host: bool = False
    ) -> List[Tensor]: ...
    def batch_fetch_cluster_group(
        self, cluster_group: int, *, verify_crc32c: bool = False, device_to_host: bool = False
    ) -> List[Tensor]: ...
    def watch(
        self,
        prefix: str = "",
        *,
        from_version: Optional[int] = None,
        send_existing: bool = False,
        max_buffered_events: int = 4096,
        cluster: bool = False,
    ) -> Watch: ...
    def health(self, service: str = "") -> str: ...
    @property
    def local(self) -> bool: ...

def build_info() -> Dict[str, Any]: ...
def tune_malloc_for_transfers() -> None:
    """For a program that moves large tensors, once: keeps up to 64 MiB of
    freed heap per malloc arena for gRPC's next receive buffers (process-wide;
    glibc only)."""
def _export_counters() -> Tuple[int, int]: ...
def _set_error_class(error_class: type) -> None: ...
