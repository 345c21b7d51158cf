"""The instruction-by-instruction builder as a new user meets it: what it refused too late (at ptxas or
not at all), where its errors pointed, and what they said was legal (CPU only; ptxas where present)."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import Addr, f32, pred, u32, u64
from ptxforge.assembler import available_backends
from support.located import assert_located, marked_line

HERE = __file__

needs_ptxas = pytest.mark.skipif("ptxas" not in available_backends(), reason="needs ptxas")


def _assembles(module, arch="sm_80"):
    pf.assemble(module, arch, backend="ptxas")


# ---------------------------------------------------------------- guards and conditions

def test_a_guard_that_is_not_a_predicate_is_named_as_the_user_wrote_it():
    k = pf.KernelBuilder("g")
    r = k.reg(u32)
    with pytest.raises(pf.ValidationError) as info:
        with k.if_(r):  # <- if-u32
            pass
    assert_located(info.value, "<- if-u32", HERE)
    msg = str(info.value)
    assert "Guard(" not in msg and "Reg(" not in msg, msg
    assert "%r0 (.u32)" in msg and "setp" in msg, msg
    with pytest.raises(pf.ValidationError) as info:
        k.add(r, 1, pred=~r)  # <- negated-u32
    assert_located(info.value, "<- negated-u32", HERE)
    assert "Guard(" not in str(info.value) and "%r0 is .u32, not .pred" in str(info.value)


def test_a_label_name_that_is_not_a_string_is_a_validation_error():
    k = pf.KernelBuilder("lab")
    with pytest.raises(pf.ValidationError) as info:
        k.label(5)  # <- int-label
    assert_located(info.value, "<- int-label", HERE)
    assert "label name 5" in str(info.value)


# ---------------------------------------------------------------- one kernel's parts in another

@needs_ptxas
def test_a_shared_array_of_another_kernel_is_refused_at_the_users_line():
    other = pf.KernelBuilder("other")
    buf = other.shared("buf", 64)
    k = pf.KernelBuilder("mine")
    with pytest.raises(pf.ValidationError) as info:
        k.ld(buf, type=u32, space="shared")  # <- foreign-ld
    assert_located(info.value, "<- foreign-ld", HERE)
    assert "'other'" in str(info.value) and "shared()" in str(info.value)
    for use in (lambda: k.shared_base(buf), lambda: k.st(Addr(buf, 4), 1, type=u32, space="shared"),
                lambda: k.atom("add", buf, 1, type=u32, space="shared")):
        with pytest.raises(pf.ValidationError, match="belongs to kernel 'other'"):
            use()
    # the kernel's own array is fine, and so is the other kernel's use of it
    own = k.shared("buf", 64)
    k.ld(own, type=u32, space="shared")
    _assembles(k.module())
    other.ld(buf, type=u32, space="shared")
    _assembles(other.module())


# ---------------------------------------------------------------- after finish()

@pytest.mark.parametrize("late", [
    lambda k: k.shared("late", 16),
    lambda k: k.dynamic_shared("late"),
    lambda k: k.param("late", u32),
    lambda k: k.comment("late"),
    lambda k: k.place(k.label("late")),
    lambda k: k.note("late", 1),
    lambda k: k.section("late"),
    lambda k: k.local_array("late", u32, 4),
], ids=["shared", "dynamic_shared", "param", "comment", "place", "note", "section", "local_array"])
def test_declarations_after_finish_are_refused_not_lost(late):
    k = pf.KernelBuilder("done")
    k.finish()
    with pytest.raises(pf.ValidationError, match="'done' is finished"):
        late(k)
    assert k.finish().params == () and k.finish().shared == ()


def test_a_finished_function_is_called_a_function():
    f = pf.FunctionBuilder("helper")
    f.finish()
    with pytest.raises(pf.ValidationError, match="function 'helper' is finished"):
        f.add(f.reg(u32), 1)


# ---------------------------------------------------------------- sizes and offsets are integers

@pytest.mark.parametrize("size", [64.5, True, "64", 64.0])
def test_a_shared_size_that_is_not_an_integer_is_refused(size):
    k = pf.KernelBuilder("sz")
    with pytest.raises(pf.ValidationError) as info:
        k.shared("buf", size)  # <- shared-size
    assert_located(info.value, "<- shared-size", HERE)
    assert "integer" in str(info.value)


def test_numpy_integer_sizes_and_offsets_are_integers():
    k = pf.KernelBuilder("npsz")
    s = k.shared("buf", np.int64(64), align=np.int32(16))
    k.shared_base(s, np.uint32(8))
    assert k.finish().shared[0].nbytes == 64


@pytest.mark.parametrize("offset", [1.5, True])
def test_a_shared_base_offset_that_is_not_an_integer_is_refused(offset):
    k = pf.KernelBuilder("off")
    s = k.shared("buf", 64)
    with pytest.raises(pf.ValidationError) as info:
        k.shared_base(s, offset)  # <- base-offset
    assert_located(info.value, "<- base-offset", HERE)


# ---------------------------------------------------------------- bools as immediates

@pytest.mark.parametrize("flag", [True, np.bool_(True), False, np.bool_(False)])
def test_a_bool_is_an_immediate_of_a_predicate_only(flag):
    k = pf.KernelBuilder("flags")
    r = k.reg(u32)
    with pytest.raises(pf.ValidationError) as info:
        k.add(r, flag)  # <- bool-add
    assert_located(info.value, "<- bool-add", HERE)
    assert "bool" in str(info.value) and "1 or 0" in str(info.value), str(info.value)
    with pytest.raises(pf.ValidationError, match="bool"):
        k.mul(k.reg(f32), flag)
    with pytest.raises(pf.ValidationError, match="bool"):
        k.st(k.param_ptr("p", u32), flag, type=u32)
    p = k.mov(flag, type=pred)  # mov.pred %p0, 1: the one place True means something
    assert p.type is pred
    k.add(r, np.int64(3))  # numpy integers stay integers
    text = k.module().ptx
    assert f"mov.pred        %p0, {int(bool(flag))};" in text, text


def test_a_bool_argument_for_a_number_parameter_is_refused():
    f = pf.FunctionBuilder("half_it")
    x = f.param_value("x", f32)
    f.result("y", f32)
    f.set_result(f.mul(x, 0.5))
    k = pf.KernelBuilder("caller")
    with pytest.raises(pf.ValidationError) as info:
        k.call(f, args=[True])  # <- bool-arg
    assert_located(info.value, "<- bool-arg", HERE)


# ---------------------------------------------------------------- calls

def test_a_call_of_a_function_for_another_target_is_refused_at_the_call():
    f = pf.FunctionBuilder("newer", target="sm_90")
    f.result("y", u32)
    f.set_result(1)
    k = pf.KernelBuilder("older", target="sm_80")
    with pytest.raises(pf.TargetError) as info:
        k.call(f)  # <- cross-target
    assert_located(info.value, "<- cross-target", HERE)
    assert "sm_90" in str(info.value) and "sm_80" in str(info.value)


def test_a_wrong_return_register_is_named_as_ptx_names_it():
    f = pf.FunctionBuilder("one")
    f.result("y", f32)
    f.set_result(1.0)
    k = pf.KernelBuilder("caller")
    with pytest.raises(pf.ValidationError) as info:
        k.call(f, returns=k.reg(u32))
    assert "Reg(" not in str(info.value) and "%r0 (.u32)" in str(info.value), str(info.value)


# ---------------------------------------------------------------- atomics take offset= as ld/st do

@needs_ptxas
def test_atom_and_red_take_a_constant_offset():
    k = pf.KernelBuilder("atoms")
    s = k.shared("counts", 64)
    g = k.param_ptr("g", u32)
    old = k.atom("add", s, 1, type=u32, space="shared", offset=8)
    k.red("add", g, old, offset=4)
    k.atom("cas", g, 1, compare=0, type=u32, offset=12)
    text = k.module().ptx
    assert "atom.shared.add.u32" in text and "[counts+8]" in text
    assert "red.global.add.u32     [%g+4]" in text or "[%g+4]" in text
    assert "[%g+12]" in text
    _assembles(k.module())


# ---------------------------------------------------------------- parameters

@needs_ptxas
def test_a_parameter_of_another_kernel_is_refused():
    other = pf.KernelBuilder("other")
    n = other.param("n", u32)
    k = pf.KernelBuilder("mine")
    with pytest.raises(pf.ValidationError) as info:
        k.load_param(n)  # <- foreign-param
    assert_located(info.value, "<- foreign-param", HERE)
    assert "'mine'" in str(info.value) and "param" in str(info.value)
    with pytest.raises(pf.ValidationError, match="not a parameter of 'mine'"):
        k.ld(n, type=u32, space="param")
    own = k.param("n", u32)
    k.load_param(own)
    k.load_param("n")
    _assembles(k.module())


def test_a_missing_parameter_of_a_kernel_without_parameters_says_so():
    k = pf.KernelBuilder("bare")
    with pytest.raises(pf.ValidationError, match="has no parameter 'n'; it has none"):
        k.load_param("n")


@needs_ptxas
@pytest.mark.parametrize("kw, word", [
    (dict(nbytes=True), "integer"), (dict(nbytes=16.0), "integer"), (dict(nbytes=16, align=3), "power of two"),
    (dict(nbytes=16, align=2.0), "power of two"), (dict(nbytes=0), "positive")])
def test_a_parameter_block_needs_an_integer_size_and_a_power_of_two_alignment(kw, word):
    k = pf.KernelBuilder("blocks")
    with pytest.raises(pf.ValidationError, match=word) as info:
        k.param("blk", pf.b8, **kw)  # <- param-block
    assert_located(info.value, "<- param-block", HERE)
    k.param("ok", pf.b8, nbytes=np.int64(16), align=np.int32(8))
    assert k.finish().params[0].nbytes == 16
    _assembles(k.module())


# ---------------------------------------------------------------- constant offsets are integers

@pytest.mark.parametrize("offset", [1.5, True, 4.0, "4"])
def test_a_memory_offset_that_is_not_an_integer_is_refused(offset):
    k = pf.KernelBuilder("offs")
    g = k.param_ptr("g", f32)
    with pytest.raises(pf.ValidationError) as info:
        k.ld(g, type=f32, offset=offset)  # <- ld-offset
    assert_located(info.value, "<- ld-offset", HERE)
    assert "offset" in str(info.value) and "integer" in str(info.value)
    with pytest.raises(pf.ValidationError, match="offset"):
        k.st(g, 1.0, type=f32, offset=offset)


@needs_ptxas
def test_numpy_integer_offsets_are_offsets():
    k = pf.KernelBuilder("npoffs")
    g = k.param_ptr("g", f32)
    k.st(g, k.ld(g, type=f32, offset=np.int64(8)), offset=np.uint32(4))
    assert "[%g+8]" in k.module().ptx and "[%g+4]" in k.module().ptx
    _assembles(k.module())


# ---------------------------------------------------------------- regs()

@pytest.mark.parametrize("n", [2.5, -1, True])
def test_regs_takes_a_count(n):
    k = pf.KernelBuilder("counts")
    with pytest.raises(pf.ValidationError) as info:
        k.regs(u32, n)  # <- regs-count
    assert_located(info.value, "<- regs-count", HERE)


def test_regs_names_are_made_unique_as_reg_makes_them():
    k = pf.KernelBuilder("names")
    assert str(k.regs(u32, 2, "acc")) == "{%acc0, %acc1}"
    assert str(k.regs(u32, 2, "r")) == "{%r0_1, %r1_1}"  # never an automatic name
    assert "made unique" in pf.KernelBuilder.regs.__doc__


# ---------------------------------------------------------------- fold: integer arithmetic

@pytest.mark.parametrize("op", ["mul", "div", "rem", "mad"])
def test_fold_names_a_float_register_as_the_mistake(op):
    from ptxforge import fold as F
    k = pf.KernelBuilder("folds")
    x = k.reg(f32)
    args = (4, 1) if op == "mad" else (4,)
    with pytest.raises(pf.ValidationError) as info:
        getattr(F, op)(k, x, *args)  # <- fold-float
    assert_located(info.value, "<- fold-float", HERE)
    assert f"fold.{op}" in str(info.value) and "%f0 (.f32)" in str(info.value), str(info.value)
    assert "shl" not in str(info.value) and "shr" not in str(info.value)


# ---------------------------------------------------------------- .noreturn functions

def test_a_noreturn_function_gets_no_ret_from_the_builder():
    f = pf.FunctionBuilder("die", noreturn=True)
    f.trap()
    body = [i.opcode for i in f.finish().instructions]
    assert body == ["trap"], body  # finish() added `ret` to a function declared never to return
    k = pf.KernelBuilder("caller")
    k.call(f)
    if "ptxas" in available_backends():
        _assembles(k.module())


def test_a_noreturn_function_that_can_return_is_refused():
    f = pf.FunctionBuilder("die", noreturn=True)
    with pytest.raises(pf.ValidationError) as info:
        f.ret()  # <- noreturn-ret
    assert_located(info.value, "<- noreturn-ret", HERE)
    assert "trap" in str(info.value) and "exit" in str(info.value)
    f.add(f.reg(u32), 1)
    with pytest.raises(pf.ValidationError, match="can reach its end") as info:
        f.finish()  # <- noreturn-falls-off
    assert_located(info.value, "<- noreturn-falls-off", HERE)
    g = pf.FunctionBuilder("spin", noreturn=True)  # an endless loop never returns either (no branch reaches the
    with g.loop():                                 # end label after its back branch)
        g.nanosleep(100)
    assert [i.opcode for i in g.finish().instructions] == ["nanosleep", "bra"]
    g = pf.FunctionBuilder("spin_until", noreturn=True)
    with g.loop():
        g.break_(g.setp("eq", g.reg(u32), 0))
    with pytest.raises(pf.ValidationError, match="can reach its end"):
        g.finish()
    h = pf.FunctionBuilder("leave", noreturn=True)
    h.exit(pred=h.setp("eq", h.reg(u32), 0))
    h.trap()
    assert [i.opcode for i in h.finish().instructions] == ["setp", "exit", "trap"]


def test_registers_in_messages_are_spelled_as_in_ptx():
    k = pf.KernelBuilder("spelling")
    p = k.reg(pred)
    with pytest.raises(pf.ValidationError) as info:
        k.printf("%d\n", p)
    assert "%p0 (.pred)" in str(info.value) and "Reg(" not in str(info.value), str(info.value)
    with pytest.raises(pf.ValidationError) as info:
        k.shared_base(k.reg(u32))
    assert "%r0 (.u32)" in str(info.value) and "Reg(" not in str(info.value), str(info.value)


# ---------------------------------------------------------------- vectors where scalars belong

def test_a_vector_where_a_scalar_belongs_is_named_as_a_vector():
    k = pf.KernelBuilder("vectors")
    g = k.param_ptr("g", u32)
    v = k.ld(g, type=u32, vec=4)
    for call in (lambda: k.add(v, 1), lambda: k.add(v, 1, type=u32), lambda: k.mul(k.reg(u32), v)):
        with pytest.raises(pf.ValidationError) as info:
            call()
        msg = str(info.value)
        assert "{%r0, %r1, %r2, %r3}" in msg and "v[0]" in msg and "Vec(" not in msg, msg
        assert "immediates alone" not in msg, msg
    k.add(v[0], 1)  # an element is a register


def test_a_one_element_list_stored_as_a_scalar_says_what_it_got():
    k = pf.KernelBuilder("lists")
    g = k.param_ptr("g", u32)
    with pytest.raises(pf.ValidationError) as info:
        k.st(g, [k.reg(u32)], type=u32)
    assert "got 1;" not in str(info.value) and "list of 1" in str(info.value), str(info.value)


def test_a_list_as_a_destination_points_to_unpack():
    k = pf.KernelBuilder("split")
    wide = k.reg(u64)
    with pytest.raises(pf.ValidationError) as info:
        k.mov(wide, dst=[k.reg(u32), k.reg(u32)])
    assert "unpack" in str(info.value) and "Reg(" not in str(info.value), str(info.value)
    lo, hi = k.unpack(wide)
    assert lo.type.bits == hi.type.bits == 32


# ---------------------------------------------------------------- finish() inside an open block

BLOCKS = ["if_", "else_", "for_range", "loop", "call_scope"]


def _block_args(k, block) -> tuple:
    """A kernel ready for `block` (else_ after an if_ block) and the arguments of the call that opens it."""
    c = k.setp("lt", k.tid(), 3)
    if block == "else_":
        with k.if_(c):
            pass
    return {"if_": (c,), "for_range": (0, 4)}.get(block, ())


@pytest.mark.parametrize("block", BLOCKS)
def test_finish_inside_an_open_block_names_the_block(block):
    k = pf.KernelBuilder("early")
    with getattr(k, block)(*_block_args(k, block)):
        with pytest.raises(pf.ValidationError) as info:
            k.module()  # <- early-finish
        assert_located(info.value, "<- early-finish", HERE)
        assert f"{block}()" in str(info.value) and "never placed" not in str(info.value), str(info.value)
        if block == "loop":
            k.break_()
    m = k.module()  # after the block, the kernel finishes
    if "ptxas" in available_backends():
        _assembles(m)


# ---------------------------------------------------------------- comments, sections and notes

@pytest.mark.parametrize("how", ["comment", "section", "note"])
def test_text_ptxas_cannot_read_is_refused_at_the_users_line(how):
    k = pf.KernelBuilder("texts")
    call = {"comment": k.comment, "section": k.section, "note": lambda t: k.note("key", t)}[how]
    with pytest.raises(pf.ValidationError) as info:
        k.note("key", "héllo") if how == "note" else call("héllo")  # <- non-ascii
    assert_located(info.value, "<- non-ascii", HERE)
    assert "ASCII" in str(info.value) and "'é'" in str(info.value), str(info.value)
    with pytest.raises(pf.ValidationError, match="NUL"):
        call("a\0b")
    call("plain text, tabs\tand all")
    if "ptxas" in available_backends():
        _assembles(k.module())


@pytest.mark.parametrize("brk", ["\x0b", "\x0c", "\x1c", "\x85", "\u2028"])
def test_sections_and_notes_refuse_every_line_break_python_splits_on(brk):
    k = pf.KernelBuilder("breaks")
    with pytest.raises(pf.ValidationError, match="line break"):
        k.note("key", f"a{brk}b")
    with pytest.raises(pf.ValidationError, match="line break"):
        k.section(f"a{brk}b")


def test_the_listing_counts_lines_as_ptxas_does():
    # a form feed is a line break to Python's splitlines but not to ptxas: a listing split that way numbered
    # every later line one too high and gave the locations to the wrong lines
    k = pf.KernelBuilder("feeds")
    r = k.tid()
    k.raw(f"add.u32 {r}, {r},\x0c1")  # raw text is verbatim (ptxas reads the form feed as a space)
    k.add(r, 1)
    m = k.module()
    listing = m.listing().split("\n")[:-1]  # (a listing line may hold the form feed too)
    assert len(listing) == m.ptx.count("\n"), listing
    add_line = next(i for i, line in enumerate(m.ptx.split("\n"), 1) if line.strip().startswith("add.u32") and
                    "raw" not in line and "\x0c" not in line)
    assert listing[add_line - 1].startswith(f"{add_line} | ") and "add.u32" in listing[add_line - 1], listing
    assert HERE.rsplit("/", 1)[-1] in listing[add_line - 1]
    assert "add.u32" in m.describe_line(add_line) and "\x0c" not in m.describe_line(add_line)


def test_a_section_is_placed_with_or_without_with():
    k = pf.KernelBuilder("sections")
    k.section("setup")  # a statement: the listing still gets its heading
    k.tid()
    with k.section("body"):
        k.add(k.tid(), 1)
    text = k.module().ptx
    assert "// ---- setup" in text and "// ---- body" in text


# ---------------------------------------------------------------- a block written without `with`

@pytest.mark.parametrize("block", BLOCKS)
def test_a_block_called_without_with_is_refused_not_dropped(block):
    k = pf.KernelBuilder("bare_blocks")
    args = _block_args(k, block)
    getattr(k, block)(*args)  # <- bare-block
    with pytest.raises(pf.ValidationError) as info:
        k.add(k.tid(), 1)  # the next instruction would land outside the block the user meant
    assert f"{block}()" in str(info.value) and "with" in str(info.value), str(info.value)
    assert str(marked_line(HERE, "<- bare-block")) in str(info.value), str(info.value)
    with pytest.raises(pf.ValidationError, match="without `with`"):
        k.finish()


def test_blocks_entered_with_with_leave_nothing_pending():
    k = pf.KernelBuilder("with_blocks")
    c = k.setp("lt", k.tid(), 3)
    cm = k.if_(c)  # made first, entered later: fine once entered
    with cm:
        k.add(k.tid(), 1)
    with k.else_():
        pass
    with k.for_range(0, 2):
        pass
    k.module()


# ---------------------------------------------------------------- .align on scalar parameters

@needs_ptxas
def test_an_aligned_scalar_parameter_is_declared_where_launches_put_it():
    k = pf.KernelBuilder("aligned")
    k.param("a", u32)
    x = k.param("x", u32, align=8)
    k.load_param(x)
    kern = k.finish()
    assert kern.param_bytes == 12  # x at offset 8: where launches pack it ...
    assert ".param .align 8 .u32 x" in k.module().ptx  # ... and where the kernel now reads it
    _assembles(k.module())
    with pytest.raises(pf.ValidationError, match="at least 4"):
        pf.KernelBuilder("under").param("x", u32, align=2)  # below the natural alignment: never honoured


def test_a_device_function_refuses_align_on_a_scalar_parameter():
    f = pf.FunctionBuilder("aligned_f")
    with pytest.raises(pf.ValidationError) as info:
        f.param("x", u32, align=8)  # <- func-align
    assert_located(info.value, "<- func-align", HERE)
    assert "call" in str(info.value)


def test_a_pointers_align_is_its_pointees_and_does_not_move_it():
    # `.param .u64 .ptr .global .align 1 p` (what LLVM writes) sits at offset 8 after a .u32, not at 4
    k = pf.KernelBuilder("pointers")
    k.param("n", u32)
    k.param("p", u64, space="global", align=1)
    assert k.finish().param_bytes == 16
    assert ".param .u64 p" in k.module().ptx


def test_a_call_of_a_finished_kernel_or_a_wrong_number_names_it_briefly():
    k = pf.KernelBuilder("caller")
    with pytest.raises(pf.ValidationError) as info:
        k.call(pf.KernelBuilder("other").finish())
    assert "'other' is a kernel" in str(info.value) and len(str(info.value)) < 300, str(info.value)
    f = pf.FunctionBuilder("ident")
    a = f.param_value("a", u32)
    f.result("y", u32)
    f.set_result(a)
    for bad, why in ((2 ** 32, "does not fit .u32"), (1.5, "does not fit .u32"), (True, "bool")):
        with pytest.raises(pf.ValidationError) as info:
            k.call(f, args=[bad])
        assert "call ident: argument 0 (a)" in str(info.value) and why in str(info.value), str(info.value)
        assert "st.param" not in str(info.value)


def test_set_result_names_a_bad_number_as_the_return_value():
    f = pf.FunctionBuilder("answer")
    f.result("y", u32)
    with pytest.raises(pf.ValidationError) as info:
        f.set_result(1.5)  # <- bad-result
    assert_located(info.value, "<- bad-result", HERE)
    assert "return value y" in str(info.value) and "st.param" not in str(info.value), str(info.value)


@pytest.mark.parametrize("thing", ["add.u32 %r0, %r0, 1", None, 5])
def test_emit_of_something_that_is_no_instruction_says_so(thing):
    k = pf.KernelBuilder("emits")
    with pytest.raises(pf.ValidationError) as info:
        k.emit(thing)  # <- emit-thing
    assert_located(info.value, "<- emit-thing", HERE)
    assert "raw()" in str(info.value)


@pytest.mark.parametrize("text", ["mov.u32 %r0, é", "mov.u32 %r0, 1\0"])
def test_raw_text_no_ptx_can_hold_is_refused(text):
    k = pf.KernelBuilder("raws")
    with pytest.raises(pf.ValidationError) as info:
        k.raw(text)  # <- raw-text
    assert_located(info.value, "<- raw-text", HERE)


def test_a_numpy_integer_alignment_is_an_alignment_for_variables_too():
    v = pf.variable("table", u32, count=4, align=np.int64(16))
    assert v.align == 16 and ".align 16" in v.render()
    with pytest.raises(pf.ValidationError, match="power of two"):
        pf.variable("table", u32, align=np.int64(12))


def test_brx_idx_index_is_an_integer_in_the_list_and_a_refusal_declares_nothing():
    """brx_idx's index: True and 1.5 were refused as "Imm(value=True, type=u32)"; 2**40 and 2 (of two labels)
    were written (a jump past the list is undefined behaviour); each refused call had already declared its
    `.branchtargets` list."""
    k = pf.KernelBuilder("brx_index", target="sm_90")
    a, b = k.label("a"), k.label("b")
    for bad, says in ((True, r"brx_idx's index takes an int or a \.u32 register, not True"),
                      (1.5, r"not 1\.5 \(float\)"), (2, r"index 2 is past .*2 labels \(0 to 1"),
                      (2 ** 40, r"is past"), (-1, r"non-negative")):
        with pytest.raises(pf.ValidationError, match=says):
            k.brx_idx(bad, [a, b])
    k.brx_idx(np.int64(1), [a, b])
    k.place(a)
    k.place(b)
    k.ret()
    text = k.module().ptx
    assert text.count(".branchtargets") == 1 and "brx.idx" in text
    assert pf.assemble(k.module(), backend="ptxas") is not None


def test_a_refused_minnctapersm_is_not_also_warned_about():
    """minnctapersm=0 without .maxntid warned that ptxas ignores it, then refused it: one message, the refusal."""
    import warnings
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(pf.ValidationError, match="positive number of CTAs per SM"):
            pf.KernelBuilder("k", minnctapersm=0)
    assert not seen, [str(w.message) for w in seen]
    with pytest.warns(UserWarning, match="ignored by ptxas unless"):
        pf.KernelBuilder("k", minnctapersm=2)
