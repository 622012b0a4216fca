"""Client.watch against real servers: changes in order (an atomic group is
one event), existing versions first, resuming from a position, fell-behind
events, iteration, timeouts and close. Runs in both venvs."""

import numpy as np
import pytest

import tensord
from tensord_server import TensordServer

TIMEOUT = 20.0


@pytest.fixture(scope="module")
def client():
    server = TensordServer(extra_flags=["--watch-history=4"])
    yield tensord.Client(server.address, path="remote")
    server.stop()


def test_changes_arrive_in_order_and_a_group_is_one_event(client, name):
    with client.watch(f"{name}/") as watch:
        first = client.put(f"{name}/a", np.arange(4, dtype=np.float32))
        client.delete(f"{name}/a")
        group = client.batch_put({f"{name}/g/0": np.ones(2), f"{name}/g/1": np.zeros(3)}, atomic=True)

        published = watch.next(timeout=TIMEOUT)
        assert (published.kind, published.version) == ("published", first.version)
        assert [item.name for item in published.items] == [f"{name}/a"]
        assert published.items[0].shape == (4,) and published.items[0].dtype == "float32"
        deleted = watch.next(timeout=TIMEOUT)
        assert deleted.kind == "deleted" and deleted.version > first.version
        assert deleted.items[0].version == first.version
        grouped = watch.next(timeout=TIMEOUT)
        assert grouped.atomic_group and grouped.version == group.group_version
        assert [item.name for item in grouped.items] == [f"{name}/g/0", f"{name}/g/1"]
        assert watch.position == group.group_version
        assert watch.next(timeout=0.2) is None
        assert "kind='published'" in repr(published)
    assert watch.closed
    assert watch.next(timeout=0) is None
    assert watch.position == group.group_version


def test_existing_versions_come_first_then_iteration_follows_changes(client, name):
    for i in range(3):
        client.put(f"{name}/{i}", np.full(2, i, dtype=np.int32))
    watch = client.watch(f"{name}/", send_existing=True)
    later = client.put(f"{name}/new", np.zeros(1, dtype=np.uint8))
    seen = []
    for event in watch:
        seen.append((event.existing, event.items[0].name))
        if not event.existing:
            assert event.version == later.version
            break
    assert seen == [(True, f"{name}/0"), (True, f"{name}/1"), (True, f"{name}/2"), (False, f"{name}/new")]
    watch.close()
    assert list(watch) == []


def test_a_resume_older_than_the_history_is_told_what_it_missed(client, name):
    first = client.put(f"{name}/0", np.zeros(1))
    for i in range(1, 8):
        client.put(f"{name}/{i}", np.zeros(1))
    watch = client.watch(f"{name}/", from_version=first.version)
    missed = watch.next(timeout=TIMEOUT)
    assert missed.kind == "fell_behind"
    assert missed.missed_after == first.version and missed.version > first.version
    names = [watch.next(timeout=TIMEOUT).items[0].name for _ in range(4)]
    assert names == [f"{name}/{i}" for i in range(4, 8)]
    watch.close()


def test_bad_arguments_are_refused(client, name):
    with pytest.raises(tensord.Error) as refused:
        client.watch("bad prefix!")
    assert refused.value.code == tensord.StatusCode.INVALID_ARGUMENT
    with pytest.raises(tensord.Error) as both:
        client.watch(f"{name}/", from_version=1, send_existing=True)
    assert both.value.code == tensord.StatusCode.INVALID_ARGUMENT
    with pytest.raises(tensord.Error) as ahead:
        client.watch(f"{name}/", from_version=10**12)
    assert ahead.value.code == tensord.StatusCode.OUT_OF_RANGE
    with client.watch(f"{name}/") as watch:
        with pytest.raises(ValueError):
            watch.next(timeout=-1)


def test_a_server_shutdown_ends_the_watch_with_unavailable(name):
    server = TensordServer()
    watch = tensord.Client(server.address, path="remote").watch("")
    server.stop()
    with pytest.raises(tensord.Error) as ended:
        watch.next(timeout=TIMEOUT)
    assert ended.value.code == tensord.StatusCode.UNAVAILABLE
