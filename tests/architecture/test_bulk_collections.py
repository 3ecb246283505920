"""pooljudge.common.fewer_collections: the garbage collector's setting for bulk work (an
export's pass), entered and left as the process had it, whatever happens inside."""

from __future__ import annotations

import gc
import threading

import pytest

from pooljudge.common import BULK_GC_THRESHOLD, fewer_collections


@pytest.fixture
def collector():
    """The collector as the test found it, put back afterwards (a failing test must not leave
    the process frozen)."""
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    yield thresholds, frozen
    gc.set_threshold(*thresholds)
    if gc.get_freeze_count() > frozen:
        gc.unfreeze()


def test_the_objects_that_exist_on_entry_sit_out_every_collection(collector):
    thresholds, _ = collector
    existing = [object()]
    with fewer_collections():
        assert gc.get_freeze_count() > 0
        assert not any(o is existing for o in gc.get_objects())  # frozen: walked by none
        assert gc.get_threshold() == (BULK_GC_THRESHOLD, *thresholds[1:])
        young = [[] for _ in range(10)]
        assert any(o is young for o in gc.get_objects(0))  # new objects are collected as ever
    assert gc.get_threshold() == thresholds
    assert gc.get_freeze_count() == 0
    assert any(o is existing for o in gc.get_objects())


def test_a_cycle_made_inside_is_still_collected(collector):
    import weakref

    class Node:
        pass

    with fewer_collections():
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        gc.collect(0)
        assert gone() is None


def test_nested_and_failing_uses_restore_the_setting_once_the_last_one_leaves(collector):
    thresholds, _ = collector
    seen = []

    def export() -> None:
        with fewer_collections():
            with fewer_collections():
                pass
            seen.append((gc.get_threshold()[0], gc.get_freeze_count() > 0))
            raise RuntimeError("the export failed")

    with pytest.raises(RuntimeError):
        export()
    assert seen == [(BULK_GC_THRESHOLD, True)]  # the inner use left the outer one's setting
    assert gc.get_threshold() == thresholds
    assert gc.get_freeze_count() == 0


def test_concurrent_uses_share_the_setting(collector):
    thresholds, _ = collector
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with fewer_collections():
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    entered.wait(10)
    with fewer_collections():
        pass
    assert gc.get_threshold()[0] == BULK_GC_THRESHOLD  # the other thread is still inside
    release.set()
    thread.join(10)
    assert gc.get_threshold() == thresholds
    assert gc.get_freeze_count() == 0
