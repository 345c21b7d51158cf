"""What emitting a schedule leaves behind and where its instructions point.

A Hopper schedule's emitter runs through internal frames only, so every instruction's position is
the line that asked for the module: `held_location` finds it once instead of per instruction, and
the answer must be the one the walk gives.  Emission must leave no reference cycle holding the
kernel (a class made per call or a recursive closure did), so the kernel is freed as soon as it is
dropped, not at the next full collection.
"""

import gc
import sys

from ptxforge.errors import caller_loc, held_location
from ptxforge.schedules.hopper import HopperGemm
from ptxforge.schedules.hopper.defaults import SKINNY_S4_32
from ptxforge.schedules.hopper.emit import emit_kernel, fresh_module


def _line():
    return sys._getframe(1).f_lineno


def test_every_instruction_of_a_hopper_module_points_at_the_line_that_asked_for_it():
    cfg = HopperGemm("s4", **SKINNY_S4_32)
    m, here = fresh_module(cfg), _line()
    locs = {(ins.loc.filename, ins.loc.lineno) for k in m.kernels for ins in k.instructions}
    assert locs == {(__file__, here)}
    # the same as walking the stack for every instruction (the emitter called directly, no held position)
    walked, there = emit_kernel(cfg).module(), _line()
    assert {(ins.loc.filename, ins.loc.lineno) for k in walked.kernels for ins in k.instructions} == \
        {(__file__, there)}
    assert str(walked) == str(m)


def test_a_held_position_is_this_threads_and_ends_with_its_block():
    outer = caller_loc()
    assert outer.filename == __file__
    with held_location():
        held = caller_loc()
        with held_location():  # nested: the outer position stays
            assert caller_loc() == held
        assert caller_loc() == held
        import threading
        seen = []
        t = threading.Thread(target=lambda: seen.append(caller_loc()))
        t.start()
        t.join()
        assert seen[0] != held  # another thread walks its own stack
    assert caller_loc().lineno != held.lineno  # walked again after the block


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
