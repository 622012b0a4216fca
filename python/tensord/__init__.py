"""tensord: fetch and put named tensors on a tensord server.

    import tensord, torch
    client = tensord.Client("127.0.0.1:50051")
    client.put("weights/emb", torch.arange(6.0).reshape(2, 3))
    emb = torch.from_dlpack(client.fetch("weights/emb"))   # zero-copy
    client.batch_put({"w/a": torch.ones(3), "w/b": torch.zeros(2)}, atomic=True)  # one version
    with client.create("weights/out", torch.float32, (2, 3)) as writer:  # zero-copy, local handoff
        torch.from_dlpack(writer).copy_(result)                          # sealed at the end

See docs/python.md in the repository.
"""

import enum


class StatusCode(enum.IntEnum):
    """gRPC's canonical status codes."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class Error(Exception):
    """A tensord call failed. `code` is the gRPC status code, `message` the server's or client's words."""

    def __init__(self, code: int, message: str):
        try:
            self.code = StatusCode(code)
        except ValueError:
            self.code = code
        self.message = message
        name = self.code.name if isinstance(self.code, StatusCode) else str(code)
        super().__init__(f"{name}: {message}")


from tensord._tensord import (  # noqa: E402
    MAX_BATCH_ITEMS,
    BatchPutResult,
    Client,
    SealGroupResult,
    Tensor,
    TensorInfo,
    TensorWriter,
    Watch,
    WatchEvent,
    __version__,
    _export_counters,
    _set_error_class,
    build_info,
    tune_malloc_for_transfers,
)

_set_error_class(Error)
del _set_error_class

__all__ = [
    "MAX_BATCH_ITEMS",
    "BatchPutResult",
    "Client",
    "Error",
    "SealGroupResult",
    "StatusCode",
    "Tensor",
    "TensorInfo",
    "TensorWriter",
    "Watch",
    "WatchEvent",
    "__version__",
    "build_info",
    "tune_malloc_for_transfers",
]
