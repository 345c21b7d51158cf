"""Instruction -> executor: the table of what the interpreter models.

An instruction whose opcode is not here, or whose form a factory refuses, becomes an executor
that raises `InterpUnsupported` naming the instruction and its Python line when (and only when)
a thread executes it.
"""

from __future__ import annotations

from ..isa.arith import ARITH
from ..isa.bits import BITFIELD, SHIFT_TYPES
from ..isa.opaque import OPAQUE
from ..isa.video import VIDEO
from . import (exec_arith, exec_async, exec_async_store, exec_bits, exec_call, exec_cluster, exec_integer,
               exec_mbarrier, exec_memory, exec_move, exec_narrow, exec_printf, exec_reduce, exec_regpool, exec_stack,
               exec_sync, exec_tensor, exec_tensormap, exec_tma, exec_video, exec_warp, exec_wgmma, exec_wmma)
from .findings import InterpUnsupported
from .ops import BLOCKING, BRANCH, PLAIN, Op

_PTXFORGE_INTERNAL = True

FACTORIES = {
    **{k: exec_arith.make_arith for k in ARITH},  # every row of the table; semantics by opcode there
    **{k: exec_bits.make_logic for k in ("and", "or", "xor", "not", "cnot")},
    **{k: exec_bits.make_shift for k in SHIFT_TYPES},
    "lop3": exec_bits.make_lop3, "prmt": exec_bits.make_prmt, "shf": exec_bits.make_shf,
    **{k: exec_bits.make_bitfield for k in BITFIELD},
    "bmsk": exec_bits.make_bmsk, "szext": exec_bits.make_szext, "fns": exec_bits.make_fns,
    # calls are expanded when a Program is built (exec_call); parameters travel through registers
    exec_call.PARAM_MOVE: exec_call.make_param_move, exec_call.UNSUPPORTED_CALL: exec_call.make_unsupported_call,
    "mov": exec_move.make_mov, "setp": exec_move.make_setp, "selp": exec_move.make_selp,
    "set": exec_move.make_set, "slct": exec_move.make_slct, "testp": exec_move.make_testp,
    "cvt": exec_move.make_cvt, "cvta": exec_move.make_cvta, "cvt.narrow": exec_narrow.make_cvt_narrow,
    "cvt.pack": exec_narrow.make_cvt_pack, "movmatrix": exec_warp.make_movmatrix,
    "ld": exec_memory.make_ld, "st": exec_memory.make_st,
    "atom": exec_memory.make_atom, "red": exec_memory.make_atom,
    "ldmatrix": exec_memory.make_ldmatrix, "stmatrix": exec_memory.make_stmatrix,
    "cp.async": exec_async.make_cp_async, "cp.async.commit_group": exec_async.make_commit,
    "cp.async.wait_group": exec_async.make_wait_group, "cp.async.wait_all": exec_async.make_wait_all,
    "cp.async.mbarrier.arrive": exec_async.make_cp_mbarrier_arrive,
    "cp.async.bulk": exec_tma.make_bulk_copy, "cp.async.bulk.tensor": exec_tma.make_tensor,
    "tensormap.replace": exec_tensormap.make_tensormap_replace,
    "tensormap.cp_fenceproxy": exec_tensormap.make_tensormap_cp_fenceproxy,
    "cp.reduce.async.bulk": exec_reduce.make_bulk_reduce,
    "cp.reduce.async.bulk.tensor": exec_reduce.make_tensor_reduce,
    "cp.async.bulk.commit_group": exec_tma.make_bulk_commit, "cp.async.bulk.wait_group": exec_tma.make_bulk_wait,
    "createpolicy": exec_async.make_createpolicy,
    "membar": exec_async.make_fence, "fence": exec_async.make_fence, "nanosleep": exec_async.make_noop,
    "prefetch": exec_async.make_noop,
    # hints with no effect on values: the interpreter has no caches and no dependent grids
    "prefetchu": exec_async.make_noop, "applypriority": exec_async.make_noop, "griddepcontrol": exec_async.make_noop,
    "cp.async.bulk.prefetch": exec_async.make_noop, "cp.async.bulk.prefetch.tensor": exec_async.make_noop,
    # discard leaves 128 bytes undefined; keeping their old values is one of the values allowed
    "discard": exec_async.make_noop, "pmevent": exec_async.make_noop,
    "ldu": exec_memory.make_ld, "isspacep": exec_move.make_isspacep, "match": exec_warp.make_match,
    "bar.warp.sync": exec_sync.make_bar_warp_sync,
    "shfl": exec_warp.make_shfl, "vote": exec_warp.make_vote, "redux": exec_warp.make_redux,
    "elect": exec_warp.make_elect, "activemask": exec_warp.make_activemask,
    "mma": exec_tensor.make_mma, "mma.sp": exec_tensor.make_mma_sp,
    "wmma.load": exec_wmma.make_wmma_load, "wmma.store": exec_wmma.make_wmma_store, "wmma.mma": exec_wmma.make_wmma_mma,
    **{f"{k}.carry": exec_integer.make_carry for k in ("add", "sub", "mad")},
    "dp4a": exec_integer.make_dot, "dp2a": exec_integer.make_dot,
    **{k: exec_video.make_video for k in VIDEO},
    "st.async": exec_async_store.make_async_store, "red.async": exec_async_store.make_async_store,
    "mbarrier.pending_count": exec_mbarrier.make_pending_count, exec_printf.PRINTF: exec_printf.make_printf,
    "alloca": exec_stack.make_alloca, "stacksave": exec_stack.make_stacksave,
    "stackrestore": exec_stack.make_stackrestore,
    "mapa": exec_cluster.make_mapa, "getctarank": exec_cluster.make_getctarank,
    "wgmma": exec_wgmma.make_wgmma, "wgmma.sp": exec_wgmma.make_wgmma, "wgmma.fence": exec_wgmma.make_wgmma_fence,
    "wgmma.commit_group": exec_wgmma.make_wgmma_commit, "wgmma.wait_group": exec_wgmma.make_wgmma_wait,
}

BLOCKING_FACTORIES = {
    "barrier.cluster": exec_cluster.make_barrier_cluster,
    "bar": exec_sync.make_bar, "bar.red": exec_sync.make_bar_red,
    "setmaxnreg": exec_regpool.make_setmaxnreg,  # an .inc may wait for registers
    "ret": exec_sync.make_exit, "exit": exec_sync.make_exit, "trap": exec_sync.make_trap,
    **{f"mbarrier.{k}": exec_mbarrier.make_mbarrier
       for k in ("init", "arrive", "arrive_drop", "expect_tx", "complete_tx", "test_wait", "try_wait", "inval")},
}


def _refusal(exc):
    def refuse(S, m):
        raise exc
    refuse.unsupported = exc  # what the executor will raise: readable without running it
    return refuse


def build_op(P, pc, ins) -> Op:
    """The `Op` for instruction `ins` at `pc` of Program `P`: its guard, control-flow kind and executor (branches
    resolve their target; an instruction the interpreter does not model gets an executor that raises
    InterpUnsupported when reached).
    """
    op = Op(pc, ins, None)
    if ins.guard is not None:
        op.guard = P.slot(ins.guard.reg, bool)
        op.negate = ins.guard.negate
    if ins.opcode == "bra":
        op.flow = BRANCH
        op.target = P.target(ins.info, ins)
        op.uni = "uni" in ins.mods
        op.fn = None
        return op
    factory = FACTORIES.get(ins.opcode)
    flow = PLAIN
    if factory is None:
        factory = BLOCKING_FACTORIES.get(ins.opcode)
        flow = BLOCKING
    if factory is None and ins.opcode == OPAQUE:
        op.fn = _refusal(InterpUnsupported(
            f"'{ins.render()}' is {ins.info.reason}: no table vouches for it, so the interpreter has no "
            "semantics for it (whether ptxas accepts it is not known here; the interpreter runs the instruction "
            "forms the ISA tables hold)", ins))
        return op
    if factory is None:
        op.fn = _refusal(InterpUnsupported(f"the interpreter does not model '{ins.opcode}'", ins))
        return op
    op.flow = flow
    try:
        op.fn = factory(P, op)
    except InterpUnsupported as e:
        op.fn = _refusal(e)
    return op
