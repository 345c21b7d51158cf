"""Differential testing against ptxas: legal forms and their near-miss mutations.

A *near miss* is a legal candidate (`candidates.legal_candidates`) with one parameter changed (an
immediate, a count, a vector width, a type, a shape, a state space ...), emitted for a different
target, or rendered at a lower `.version`.  ptxforge's verdict comes from emitting the mutated spec
through the builder; ptxas's verdict on a refused one comes from the PTX the legal spec renders to,
with the same change made to the text of its instruction (a replaced immediate or mnemonic token, a
lower `.target` or `.version`).  A change that has no spelling in the text (a dropped operand, the
generic space) is not sent to ptxas and is counted as unmapped.

`run_lane` assembles many forms per module and bisects a module that fails, so the lane stays fast.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from hypothesis import strategies as st

from ..assembler import AssemblyError, assemble
from ..errors import PtxforgeError
from ..isa import types as T
from ..isa.instruction import Instruction
from ..isa.operands import Addr, Imm
from ..isa.strictness import documented
from ..isa.targets import RELEASED_VERSIONS, PtxVersion, Target
from ..isa.tensor import MMA_FORMS
from ..module import Module
from .candidates import legal_candidates
from .emit import emit_spec
from .spec import FAMILIES, TARGETS, Scratch, Spec

#: Values an integer parameter is mutated to: the edges of the fields PTX has.
INT_EDGES = (-1, 0, 1, 2, 3, 7, 8, 12, 15, 16, 17, 31, 32, 33, 63, 64, 127, 128, 255, 256, 1023, 1024, 1025, 2048,
             (1 << 16) - 1, 1 << 16, (1 << 20) - 1, 1 << 20, (1 << 31) - 1, (1 << 32) - 1, 1 << 32)
_TYPE_NAMES = tuple(t.name for t in T.ALL if t is not T.pred) + ("pred",)
_SHAPES = tuple(sorted({f.shape for f in MMA_FORMS} | {"m8n8", "m16n16", "m8n16", "m16n8k4", "m8n8k4"}))
#: Parameter name -> the values a string parameter is mutated to.
STR_CHOICES = {
    "type": _TYPE_NAMES, "a_type": _TYPE_NAMES, "b_type": _TYPE_NAMES, "acc": _TYPE_NAMES,
    "to": _TYPE_NAMES, "frm": _TYPE_NAMES,
    "shape": _SHAPES,
    "space": ("global", "shared", "shared::cta", "local", "param", "const", "generic"),
    "cop": ("ca", "cg", "cs", "lu", "cv", "wb", "wt"),
    "cache": ("ca", "cg", "cs"),
    "level": ("L1", "L2", "L2::evict_last", "L2::evict_normal", "L2::evict_first", "L2::evict_unchanged",
              "L2::evict_first", "L2::evict_unchanged"),
    "rnd": ("rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi"),
    "cmp": ("eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "num", "nan"),
    "atom_op": ("add", "min", "max", "and", "or", "xor", "exch", "cas", "inc", "dec"),
    "redux_op": ("add", "min", "max", "and", "or", "xor"),
    "mode": ("up", "down", "bfly", "idx", "all", "any", "uni", "ballot", "lo", "hi", "wide", "wrap", "clamp",
             "f4e", "b4e", "rc8", "ecl", "ecr", "rc16", "sat", "approx", "full", "rn", "rz"),
    "direction": ("l", "r"),
    "action": ("inc", "dec"),
    "bitop": ("xor", "and", "or"),
}
#: Integer parameters whose value is written as the instruction's immediate.
INT_PARAMS = ("size", "count", "n", "ns", "nbytes", "id", "lane", "mask", "lut", "offset", "phase", "expect_tx",
              "src_size", "dst_offset", "src_offset", "vec", "num", "imm")
#: Counts of registers or parts: mutated among small values only (each is a register to allocate).
SMALL_PARAMS = ("vec", "num", "n")
SMALL_EDGES = (1, 2, 3, 4, 5, 6, 8, 16)
#: Boolean parameters spelled as one mnemonic token when true.
BOOL_TOKENS = {"trans": "trans", "nc": "nc", "uni": "uni", "sat": "sat", "ftz": "ftz", "satfinite": "satfinite"}


@dataclass(frozen=True)
class Mutation:
    """One near-miss: `param` of the legal spec `base` changed from `old` to `new` (param "target"
    and "version" change the module instead)."""

    base: Spec
    target: str
    param: str
    old: object
    new: object

    def spec(self) -> Spec:
        """The mutated Spec (the legal one itself when the mutation changes the module's target or version)."""
        if self.param in ("target", "version"):
            return self.base
        return self.base.with_params(**{self.param: self.new})

    def __repr__(self) -> str:
        return f"{self.base!r} on {self.target}: {self.param} {self.old!r} -> {self.new!r}"


def mutations(base: Spec, target: str):
    """A Hypothesis strategy of near-miss mutations of one legal spec."""
    options = []
    for key, value in base.params:
        if key == "guard":
            continue
        if base.family == "arith" and key == "type" and (base.get("flags") or base.get("mode")):
            continue  # modes and flags are spelled per type class in the builder's API, not in PTX
        if isinstance(value, bool):
            options.append(st.just((key, value, not value)))
        elif isinstance(value, int) and key in INT_PARAMS:
            edges = SMALL_EDGES if key in SMALL_PARAMS else INT_EDGES
            options.append(st.sampled_from([v for v in edges + (value - 1, value + 1, 2 * value)
                                            if v != value and (key not in SMALL_PARAMS or 1 <= v <= 16)])
                           .map(lambda v, k=key, o=value: (k, o, v)))
        elif isinstance(value, str) and key in STR_CHOICES:
            options.append(st.sampled_from([v for v in STR_CHOICES[key] if v != value])
                           .map(lambda v, k=key, o=value: (k, o, v)))
    older = [t for t in TARGETS if (Target.parse(t).sm, Target.parse(t).arch_specific)
             < (Target.parse(target).sm, Target.parse(target).arch_specific)]
    if older:
        options.append(st.sampled_from(older).map(lambda t: ("target", target, t)))
    options.append(st.just(("version", None, "lower")))
    return st.one_of(options).map(lambda m: Mutation(base, target, *m))


@st.composite
def lane_draws(draw, n_legal=(20, 60), n_miss=(20, 60)):
    """(target, legal specs, near-miss mutations) drawn over every family's table candidates."""
    target = draw(st.sampled_from(TARGETS), label="target")
    pool = [s for fam in FAMILIES for s in legal_candidates(target, fam)]
    legal = draw(st.lists(st.sampled_from(pool), min_size=n_legal[0], max_size=n_legal[1]), label="legal")
    bases = draw(st.lists(st.sampled_from(pool), min_size=n_miss[0], max_size=n_miss[1]), label="bases")
    misses = [draw(mutations(b, target)) for b in bases]
    return target, legal, misses


# ---------------------------------------------------------------- verdicts

@dataclass
class Counts:
    """What one lane run saw."""

    accepted: int = 0  # legal forms and accepted near misses, all assembled
    refused: int = 0  # near misses ptxforge refused
    also_refused: int = 0  # ... that ptxas refused too
    documented: int = 0  # ... that match a stricter-than-ptxas row
    unmapped: int = 0  # ... that have no spelling to send to ptxas
    crashed: int = 0  # near misses answered with something other than a ptxforge error
    failures: list = field(default_factory=list)

    def add(self, other: "Counts") -> None:
        """Add another run's counts and failures to these."""
        for f in ("accepted", "refused", "also_refused", "documented", "unmapped", "crashed"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.failures += other.failures


def _emit(target, specs, version=None):
    """A Scratch holding the specs, and for each the instructions it emitted."""
    sc = Scratch(target, "lane")
    spans = []
    for s in specs:
        start = len(sc.k._body)
        emit_spec(sc, s)
        spans.append([x for x in sc.k._body[start:] if isinstance(x, Instruction)])
    return sc, spans


def _accepts(target, s: Spec):
    """None when ptxforge accepts `s` for `target`, else the refusal (a PtxforgeError, or the raw
    exception where the builder answered a mistake with something else)."""
    try:
        _emit(target, [s])
    except PtxforgeError as e:
        return e
    except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError) as e:
        return e
    return None


def _assembles(target, specs) -> str | None:
    """None when the specs, emitted into one kernel, assemble; else the assembler's message."""
    try:
        sc, _ = _emit(target, specs)
        assemble(sc.module(), backend="ptxas")
    except AssemblyError as e:
        return str(e)
    return None


def _bisect_assembly(target, specs, counts: Counts):
    """Assemble specs together; on failure split until the failing specs are named."""
    verdict = _assembles(target, specs)
    if verdict is None:
        counts.accepted += len(specs)
        return
    if len(specs) == 1:
        counts.failures.append(f"accepted but ptxas rejects: {specs[0]!r} for {target}\n{verdict}")
        return
    half = len(specs) // 2
    _bisect_assembly(target, specs[:half], counts)
    _bisect_assembly(target, specs[half:], counts)


def _token_swap(mnemonic: str, old: str, new: str) -> str | None:
    parts = mnemonic.split(".")
    if parts.count(old) != 1:
        return None
    return ".".join(new if p == old else p for p in parts)


def _mirror(ins: Instruction, m: Mutation) -> str | None:
    """The rendered line of `ins` with the mutation applied, or None where it has no spelling."""
    line = ins.render()
    old, new, key = m.old, m.new, m.param
    if isinstance(old, bool):
        tok = BOOL_TOKENS.get(key)
        if tok is None or not old:
            return None
        mn = ins.mnemonic.split(".")
        if tok not in mn:
            return None
        return line.replace(ins.mnemonic, ".".join(p for p in mn if p != tok), 1)
    if key in ("vec", "num"):
        prefix = "v" if key == "vec" else "x"
        mn = _token_swap(ins.mnemonic, f"{prefix}{old}", f"{prefix}{new}")
        return None if mn is None else line.replace(ins.mnemonic, mn, 1)
    if isinstance(old, int):
        ops = list(ins.operands)
        hits = [i for i, op in enumerate(ops) if (type(op) is Imm and op.value == old)
                or (type(op) is Addr and op.offset == old and old != 0)]
        if len(hits) != 1:
            return None
        op = ops[hits[0]]
        ops[hits[0]] = Imm(new, op.type) if type(op) is Imm else Addr(op.base, new)
        try:
            return Instruction(ins.opcode, ins.mnemonic, tuple(ops), ins.n_dst, ins.guard).render()
        except (OverflowError, ValueError):
            return None
    if isinstance(old, str) and isinstance(new, str):
        mn = _token_swap(ins.mnemonic, old, new)
        return None if mn is None else line.replace(ins.mnemonic, mn, 1)
    return None


def _lower_version(target: str, version: PtxVersion) -> PtxVersion | None:
    floor = Target.parse(target).min_ptx
    below = [v for v in RELEASED_VERSIONS if floor <= v < version]
    return below[-1] if below else None


def _refused_by_ptxas(ptx: str, lines) -> set:
    """The lines among `lines` that ptxas names in an error when assembling `ptx`."""
    try:
        assemble(ptx, backend="ptxas")
    except AssemblyError as e:
        named = {line for line, sev, _ in e.diagnostics if sev != "warning"}
        if not named:  # a fatal error with no line: every candidate line stands refused only if alone
            return set(lines) if len(lines) == 1 else set()
        return named & set(lines)
    return set()


def _check_refusals(target, misses, counts: Counts):
    """Near misses ptxforge refused and that have a spelling: ptxas must refuse each line."""
    if not misses:
        return
    sc, spans = _emit(target, [m.base for m, _ in misses])
    rendered = sc.module().render()
    text = rendered.text.splitlines()
    line_of = {id(ins): n for n, (ins, _) in rendered.line_map.items()}
    want = {}
    for (m, err), span in zip(misses, spans):
        for ins in reversed(span):
            new = _mirror(ins, m)
            # the token twice in one instruction (mma...s32.u8.u8.s32): that one has no spelling, and an earlier
            # setup instruction that has it once (mov.s32) is not the near miss
            if new is None and isinstance(m.old, str) and ins.mnemonic.split(".").count(m.old) > 1:
                counts.unmapped += 1
                break
            if new is not None and id(ins) in line_of:
                n = line_of[id(ins)]
                if n in want:
                    continue
                text[n - 1] = "    " + new
                want[n] = (m, err)
                break
        else:
            counts.unmapped += 1
    if not want:
        return
    got = _refused_by_ptxas("\n".join(text) + "\n", want)
    missed = [want[n] for n in sorted(want) if n not in got]
    counts.also_refused += len(want) - len(missed)
    if missed and len(want) > 1:
        for one in missed:  # alone, a line may be reported that a fatal error hid
            _check_refusals(target, [one], counts)
        return
    for m, err in missed:
        counts.failures.append(f"ptxforge refuses but ptxas accepts: {m!r}\n  ptxforge: {err.message}")


def _check_module_mutation(target, m: Mutation, counts: Counts):
    """A legal spec for an older target or a lower .version: both must refuse it."""
    sc, _ = _emit(target, [m.base])
    module = sc.module()
    version = module.version
    if m.param == "version":
        lower = _lower_version(target, version)
        if lower is None:  # already the least version the target takes: no near miss to make
            return
        try:
            Module(module.kernels, version=lower)
        except PtxforgeError as e:
            counts.refused += 1
            if documented(e.message) is not None:  # (one-sided fences need PTX 8.6 here, not in ptxas)
                counts.documented += 1
                return
            ptx = module.render().text.replace(f".version {version}\n", f".version {lower}\n", 1)
            _expect_ptxas_refusal(ptx, target, m, e, counts)
            return
        counts.failures.append(f"ptxforge rendered {m!r} at .version {lower}, below the least {version}")
        return
    err = _accepts(m.new, m.base)
    if err is not None and not isinstance(err, PtxforgeError):
        counts.crashed += 1
        counts.failures.append(f"{m!r}: raised {type(err).__name__}: {err}")
        return
    if err is None:
        _bisect_assembly(m.new, [m.base], counts)
        return
    counts.refused += 1
    if documented(err.message) is not None:
        counts.documented += 1
        return
    ptx = module.render().text.replace(f".target {target}\n", f".target {m.new}\n", 1)
    _expect_ptxas_refusal(ptx, m.new, m, err, counts)


def _expect_ptxas_refusal(ptx, arch, m, err, counts):
    try:
        assemble(ptx, arch, backend="ptxas")
    except AssemblyError:
        counts.also_refused += 1
        return
    counts.failures.append(f"ptxforge refuses but ptxas accepts: {m!r}\n  ptxforge: {err.message}")


def run_lane(target: str, legal, misses) -> Counts:
    """Check one draw: every accepted form assembles (in one module, bisected on failure) and every
    refused near miss is refused by ptxas too or documented as deliberate."""
    counts = Counts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # emulated-instruction warnings are expected
        accepted, refused = list(legal), []
        for m in misses:
            if m.param in ("target", "version"):
                _check_module_mutation(target, m, counts)
                continue
            err = _accepts(target, m.spec())
            if err is None:
                accepted.append(m.spec())
                continue
            if not isinstance(err, PtxforgeError):
                counts.crashed += 1
                counts.failures.append(f"{m!r}: raised {type(err).__name__}: {err}")
                continue
            counts.refused += 1
            if documented(err.message) is not None:
                counts.documented += 1
            else:
                refused.append((m, err))
        _bisect_assembly(target, accepted, counts)
        _check_refusals(target, refused, counts)
    return counts
