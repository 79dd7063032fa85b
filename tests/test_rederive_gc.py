"""Re-derivation runs plugins' rederivers with the cyclic garbage collector on (the validator pauses it to read
rows): a rederiver that leaves cyclic garbage with every row must not make validation's memory grow with the bundle.
The stage and rederiver here are unit-test doubles."""

from __future__ import annotations

import gc
import weakref

from assay.api import Rederived, Stage
from assay.rederive import RederiveSetup
from assay.validate._rederive import derive_rows


class _Cycle:
    """Cyclic garbage, as a library's object graph leaves it."""

    def __init__(self) -> None:
        self.me = self


class _LeavesCycles:
    """Test double of a rederiver that leaves one cycle behind per row and notes whether the collector ran."""

    def __init__(self, setup: RederiveSetup) -> None:
        self.enabled: list[bool] = []
        self.left: list[weakref.ref[_Cycle]] = []
        _REDERIVERS.append(self)

    def check(self, row, case, shared) -> Rederived:
        self.enabled.append(gc.isenabled())
        self.left.append(weakref.ref(_Cycle()))
        gc.collect(0)
        return Rederived(1)


_REDERIVERS: list[_LeavesCycles] = []


def test_rederivers_run_with_the_collector_on_and_their_cycles_are_freed():
    stage = Stage("x-demo.stage", "d", kinds=("attack",), outcome_schema={}, run=None, rederiver=_LeavesCycles)
    rows = [{"key": {"case_id": f"c{i}"}, "stages": {"x-demo.stage": {}}} for i in range(50)]
    gc.disable()
    try:
        found = derive_rows(rows, list(range(1, 51)), lambda case_id: {}, [stage], RederiveSetup())
        assert not gc.isenabled()  # the validator's pause is back as it was
    finally:
        gc.enable()
    rederiver = _REDERIVERS.pop()
    assert sum(found.checked.values()) == 50
    assert all(rederiver.enabled)
    assert sum(ref() is not None for ref in rederiver.left) <= 1  # every cycle but the newest was collected
