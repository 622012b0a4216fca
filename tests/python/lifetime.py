"""Checks of the deleter and lease contract shared by the consumer tests."""

import gc

import tensord
from tensord_server import wait_until


class DeleterLedger:
    """Counts capsules exported and DLPack deleters run between start and check."""

    def __init__(self):
        gc.collect()
        self.exported, self.deleted = tensord._export_counters()

    def exports(self) -> int:
        return tensord._export_counters()[0] - self.exported

    def deletes(self) -> int:
        return tensord._export_counters()[1] - self.deleted

    def assert_each_deleted_once(self, expected_exports: int) -> None:
        gc.collect()
        assert self.exports() == expected_exports
        assert self.deletes() == expected_exports


def wait_for_no_leases(client: tensord.Client, name: str) -> None:
    """The server's view: every lease on `name` ended (bounded wait: the
    release reaches the server asynchronously)."""
    wait_until(lambda: client.stat(name).open_leases == 0, f"open leases on {name} to reach 0")
