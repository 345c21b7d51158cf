"""How a failing problem is reported: the problem, each backend's failures, the first differing
elements with their indices and bits, and a snippet that reruns that problem alone.

`failure_message(plan, outcome)` is the text of a PropertyFailure; `differences` lists the
elements of one output that differ (noting those that still hold the poison: never written);
`snippet` is the Python that reruns the problem (`check_problem`), with its mutant when the
check ran one.
"""

from __future__ import annotations

import numpy as np

from .problem import INT4_DTYPES

__all__ = ["failure_message", "differences", "snippet", "indent", "SHOWN"]

#: How many differing elements a report lists.
SHOWN = 5


def _fmt(a, v) -> str:
    """One element: its value and, for floats or poison, its bits."""
    if a.int4:
        lo, hi = int(v) & 15, (int(v) >> 4) & 15
        if INT4_DTYPES[a.dtype]:
            lo, hi = (lo ^ 8) - 8, (hi ^ 8) - 8
        return f"0x{int(v):02x} (values {lo}, {hi})"
    if a.bf16:
        f = np.array([int(v) << 16], np.uint32).view(np.float32)[0]
        return f"{f} (0x{int(v):04x})"
    if isinstance(v, np.floating):
        bits = np.array([v]).view(f"u{v.itemsize}")[0]
        return f"{v} (0x{int(bits):0{2 * v.itemsize}x})"
    return repr(v.item() if isinstance(v, np.generic) else v)


def differences(a, got, want, ok, got_name="got", want_name="want") -> str:
    """The count of elements of output `a` where mask `ok` is False, and the first SHOWN of them:
    index, both values (with their bits) in the output's type, the reference's own value where
    that type changed it, and whether the element still holds the poison."""
    bad = np.argwhere(~ok)
    lines = [f"{len(bad)} of {got.size} element(s) differ; first {min(len(bad), SHOWN)}:"]
    poison = a.poison
    for idx in bad[:SHOWN]:
        i = tuple(int(x) for x in idx)
        g, w = got[i], want[i]
        if want.dtype != got.dtype:  # shown as compared: in the output's type, with the reference's own value
            with np.errstate(all="ignore"):
                w = want[i].astype(got.dtype)
            note = "" if _same(w.astype(want.dtype), want[i]) else f" (the reference gave {want[i].item()!r})"
        else:
            note = ""
        if g.tobytes() == poison.tobytes():
            note += "  (poison: never written)"
        lines.append(f"{a.name}{list(i)}: {got_name} {_fmt(a, g)}, {want_name} {_fmt(a, w)}{note}")
    return "\n".join(lines)


def _same(x, y) -> bool:
    """Whether two scalars of one dtype are the same value (NaN the same as NaN)."""
    return bool(x == y) or (x != x and y != y)


def indent(text: str, by: str = "    ") -> str:
    """`text` with `by` before every line."""
    return "\n".join(by + line for line in text.splitlines())


def failure_message(plan, out) -> str:
    """A PropertyFailure's text: the problem and launch, the mutant if any, every backend's
    failures (out.failures), and the reproducing snippet."""
    p = out.problem
    head = (f"kernel {out.kernel.name} fails on problem {p.call_args()}\n"
            f"  launch: grid={p.grid}, block={p.block}, shared={p.shared}; sizes {p.sizes}")
    if plan.transform is not None:
        owner = getattr(plan.transform, "__self__", None)
        head += f"\n  (a mutant: {getattr(owner, 'label', None) or getattr(plan.transform, '__name__', 'transformed')})"
    body = "\n".join(indent(f, "  ") for f in out.failures)
    return f"{head}\n{body}\nreproduce:\n{indent(snippet(plan, p), '    ')}"


def snippet(plan, p) -> str:
    """Python that reruns problem `p` alone (check_problem), with the plan's mutation when it has one."""
    sp = plan.space
    lines, extra = [], ""
    t = plan.transform
    if t is not None:
        owner = getattr(t, "__self__", None)
        if type(owner).__name__ == "Mutant":
            lines.append(f"from ptxforge.testing.mutants import Mutant\ntransform = {owner!r}.apply")
        else:
            lines.append("transform = ...  # the transform given to check")
        extra = ", transform=transform"
    if "float_from_bits(" in p.call_args():  # a NaN or infinite scalar, spelled by its bits
        lines.insert(0, "from ptxforge.testing.problem import float_from_bits")
    if sp.repro:
        return "\n".join([sp.repro] + lines + [f"check_problem(target, space, {p.call_args()}{extra})"])
    return "\n".join(["from ptxforge.testing import check_problem"] + lines +
                     [f"check_problem(kernel, space, {p.call_args()}{extra})  # the kernel and the space given to "
                      "check"])
