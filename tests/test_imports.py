"""The package's imports point down through the layers that docs/architecture.md names.

Every file of `ptxforge/` is read with `ast` (imports at module level, inside functions and under
`TYPE_CHECKING` alike) and each import between two top-level units (a file such as `module.py` or
a folder such as `runtime/`) must go from a higher layer to a lower one.  Units on one layer are
independent of each other.  `ptxforge/__init__.py` (the public facade) and `__main__.py` may import
anything; nothing else may import the package `__init__`, since it imports every layer.

A new top-level unit has to be placed in `LAYERS` (and in docs/architecture.md) before this passes.
"""

from __future__ import annotations

import ast
import collections
import pathlib
import re

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "ptxforge"
DOC = PACKAGE.parent / "docs" / "architecture.md"

#: Bottom to top.  A unit may import units of lower layers only; units of one layer do not import each other.
LAYERS = (
    ("errors", "_version"),
    ("isa", "int4", "bfloat16"),
    ("kernel",),
    ("module", "declarations"),
    ("functions",),
    ("builder",),
    ("parse",),
    ("assembler",),
    ("runtime",),
    ("interp",),
    ("fold",),
    ("copy", "hopper"),
    ("schedules",),
    ("testing",),
    ("cli",),
)

#: Free to import any layer: the package facade and `python -m ptxforge`.
EXEMPT = ("__init__", "__main__")

#: Units whose files may import each other in a cycle (explained in docs/architecture.md); none today.
CYCLES_INSIDE = ()

#: Imports that point up today and move with a pending change (file, imported module): each one is
#: named in docs/architecture.md, and an entry that no longer matches an import fails the test.
PENDING: set = set()

LEVEL = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def _modules() -> dict:
    """Dotted module name -> path, for every .py file of the package."""
    out = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        parts = ["ptxforge", *p.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def unit_of(module: str) -> str:
    """`ptxforge.runtime.driver` -> `runtime`; `ptxforge` itself -> `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(module: str, path: pathlib.Path):
    """(line, imported ptxforge module) for every import in the file, at any depth of the tree."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield node.lineno, sub if sub in MODULES else base


def edges():
    """(file relative to the package, line, importing module, imported module) within ptxforge."""
    for module, path in MODULES.items():
        for line, target in imports_of(module, path):
            if target == "ptxforge" or target.startswith("ptxforge."):
                yield path.relative_to(PACKAGE).as_posix(), line, module, target


def test_every_top_level_unit_has_a_layer():
    units = {unit_of(m) for m in MODULES} - set(EXEMPT)
    missing = sorted(units - set(LEVEL))
    assert not missing, (
        f"top-level unit(s) {missing} of ptxforge/ have no layer: add each to LAYERS in "
        f"tests/test_imports.py (above every unit it imports, below every unit that imports it) "
        f"and to the layer list in docs/architecture.md")


def test_imports_point_down():
    bad = []
    seen_pending = set()
    for rel, line, module, target in edges():
        src, dst = unit_of(module), unit_of(target)
        if src in EXEMPT or src == dst:
            continue
        if (rel, target) in PENDING:
            seen_pending.add((rel, target))
            continue
        if dst == "__init__":
            bad.append(f"ptxforge/{rel}:{line} imports the package __init__ (which imports every layer); "
                       "import the module that defines the name")
        elif dst in LEVEL and src in LEVEL and LEVEL[dst] >= LEVEL[src]:
            how = "a unit of the same layer" if LEVEL[dst] == LEVEL[src] else "a higher layer"
            bad.append(f"ptxforge/{rel}:{line} ({src}) imports {target} ({dst}), {how}")
    assert not bad, "imports that do not point down:\n  " + "\n  ".join(bad)
    stale = sorted(set(PENDING) - seen_pending)
    assert not stale, f"PENDING lists imports that no longer exist or no longer point up; remove them: {stale}"


def _cycles(graph: dict) -> list:
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_files_import_each_other_in_a_cycle():
    graph = collections.defaultdict(set)
    for _, _, module, target in edges():
        # importing a package's __init__ for its re-exports is not a dependency on its files
        if target in MODULES and target != module and MODULES[target].name != "__init__.py":
            graph[module].add(target)
    bad = [c for c in _cycles(graph) if {unit_of(m) for m in c} - set(CYCLES_INSIDE) or
           len({unit_of(m) for m in c}) > 1]
    assert not bad, (f"files that import each other in a cycle: {bad}; move the names they share into a "
                     "file both can import (or list the unit in CYCLES_INSIDE and explain it in "
                     "docs/architecture.md)")


def test_the_architecture_document_lists_the_same_layers():
    text = DOC.read_text()
    m = re.search(r"<!-- layers -->\n(.*?)<!-- /layers -->", text, re.S)
    assert m, "docs/architecture.md must hold the layer list between <!-- layers --> and <!-- /layers -->"
    rows = [line for line in m.group(1).splitlines() if line.startswith("|") and "`" in line]
    documented = tuple(tuple(re.findall(r"`(\w+)(?:\.py|/)`", row.split("|")[2])) for row in rows)
    assert documented == tuple(reversed(LAYERS)), (
        f"docs/architecture.md lists the layers (top to bottom) as {documented}; "
        f"tests/test_imports.py has {tuple(reversed(LAYERS))}")


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    # the rule is only as good as the parser: a lazy relative import inside a function must be found
    src = tmp_path / "probe.py"
    src.write_text("def f():\n    from ..runtime import load\n    from . import plan\n")
    found = list(imports_of("ptxforge.copy.probe", src))
    assert (2, "ptxforge.runtime") in found and (3, "ptxforge.copy.plan") in found
