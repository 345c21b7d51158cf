"""What emitting a schedule leaves behind and where its instructions point.

A Hopper schedule's module is emitted once and cached, so its instructions name the schedule's own lines
(`errors.emitter_locations`: the frames of modules marked `_PTXFORGE_EMITTER` count while it is active),
not the line of whichever caller asked first.  Emission must leave no reference cycle holding the
kernel (a class made per call or a recursive closure did), so the kernel is freed as soon as it is
dropped, not at the next full collection.
"""

import gc
import os
import sys
import threading
import types

import ptxforge
from ptxforge.errors import caller_loc, emitter_locations
from ptxforge.schedules.hopper import HopperGemm
from ptxforge.schedules.hopper.defaults import SKINNY_S4_32
from ptxforge.schedules.hopper.emit import emit_kernel, fresh_module

PACKAGE = os.path.dirname(ptxforge.__file__)


def _line():
    return sys._getframe(1).f_lineno


def _locs(module):
    return [(ins.loc.filename, ins.loc.lineno) for k in module.kernels for ins in k.instructions]


def test_a_hopper_module_names_the_schedule_lines_whoever_asks_for_it():
    cfg = HopperGemm("s4", **SKINNY_S4_32)
    first = fresh_module(cfg)
    locs = _locs(first)
    files = {f for f, _ in locs}
    assert all(f.startswith(os.path.join(PACKAGE, "schedules", "hopper")) for f in files), files
    assert len(set(locs)) > 100  # the listing tells the emitter's lines apart, not one line for all
    assert all(ins.loc.code for k in first.kernels for ins in k.instructions)  # each a line of source
    again = (lambda: fresh_module(cfg))()  # another caller, another line: the same positions
    assert _locs(again) == locs and str(again) == str(first)
    # outside emitter_locations every emitter frame is internal: the walk ends at the caller's line
    walked, there = emit_kernel(cfg).module(), _line()
    assert set(_locs(walked)) == {(__file__, there)}
    assert str(walked) == str(first)


def _fake_emitter():
    """A function in a module marked internal and emitter (as schedules/hopper/emit.py is), calling caller_loc."""
    mod = types.ModuleType("fake_emitter")
    mod.__dict__.update(_PTXFORGE_INTERNAL=True, _PTXFORGE_EMITTER=True, caller_loc=caller_loc)
    exec(compile("def where():\n    return caller_loc()\n", "fake_emitter.py", "exec"), mod.__dict__)
    return mod.where


def test_emitter_frames_count_only_within_the_block_and_on_its_thread():
    where = _fake_emitter()
    outside, here = where(), _line()
    assert (outside.filename, outside.lineno) == (__file__, here)  # skipped as internal: the caller's line
    with emitter_locations():
        inside = where()
        assert (inside.filename, inside.lineno) == ("fake_emitter.py", 2)
        with emitter_locations():  # nested: still on
            assert where().filename == "fake_emitter.py"
        assert where().filename == "fake_emitter.py"
        seen = []
        t = threading.Thread(target=lambda: seen.append(where()))
        t.start()
        t.join()
        assert seen[0].filename == __file__  # another thread is not emitting
    assert where().filename == __file__  # off again after the block


def test_an_emitted_module_is_freed_without_the_cycle_collector():
    cfg = HopperGemm("s4", **SKINNY_S4_32)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        m = fresh_module(cfg)
        m.render()
        del m
        assert gc.collect() == 0  # nothing was left for the collector: reference counting freed it all
    finally:
        if was:
            gc.enable()
