"""The pages a new user reads first say what the code does: README.md, docs/architecture.md,
docs/functions.md, docs/isa.md and docs/property-testing.md.

Each test reads the pages and checks one kind of claim that drifts as the code moves: the files and
dotted `ptxforge` names they cite exist, the `ptxforge` commands and script flags they show are the
parsers', the saxpy listing the README prints is the example's, the architecture page's table of
`isa/` lists every file there, the functions page's Python blocks run and emit the call scope it
shows, the property-testing guide's failure report and mutant kinds are the library's, and the
examples in the docstrings of the package's public names run.  Each checker is a function of a
page's text, and `test_each_check_fails_on_a_broken_page` feeds it a page with the claim broken.

Checked elsewhere, not here: the README's Python blocks (tests/test_readme.py), the layer table
(tests/test_imports.py), the stricter-than-ptxas table (tests/test_strictness.py), the coverage page
(tests/test_isa_coverage.py), the guide's one-call and mutation-check output
(tests/test_examples_property_guide.py) and the `KernelBuilder` doctest (tests/test_docstrings.py).
"""

from __future__ import annotations

import argparse
import contextlib
import doctest
import fnmatch
import importlib
import io
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

import ptxforge
from support.examples import load_example

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = ("README.md", "docs/architecture.md", "docs/functions.md", "docs/isa.md", "docs/property-testing.md")


def read(page: str) -> str:
    return (ROOT / page).read_text(encoding="utf-8")


def fenced(text: str, lang: str = r"\w*") -> list[str]:
    """The bodies of the fenced blocks of a Markdown text (of one language, or all), in order."""
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.S | re.M)


def inline_code(text: str) -> list[str]:
    """The `inline code` spans of a Markdown text outside its fenced blocks (a span may wrap a line)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", prose)]


# --- files and names a page cites -------------------------------------------------------------------

_SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", "_build", "_generated", ".hypothesis"}


def _repo_paths() -> list[str]:
    """Every file and folder of the working tree (folders with a trailing /), as posix paths."""
    out = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS]
        rel = pathlib.Path(dirpath).relative_to(ROOT).as_posix()
        prefix = "" if rel == "." else rel + "/"
        out += [prefix + d + "/" for d in dirnames] + [prefix + f for f in filenames]
    return out


REPO_PATHS = _repo_paths()
_PATH = re.compile(r"""(?<![\w/.$%"'-])((?:[\w.*-]+/)*[\w*-]+(?:\.(?:py|md|sh|cu|txt|log|toml)|/))(?![\w/])""")


def missing_files(text: str, paths=REPO_PATHS) -> list[str]:
    """Paths in a page's inline code (`isa/bulk_reduce.py`, `tests/test_isa_*_audit.py`, `bench/results/`)
    that name no file or folder of the tree: a path matches a file whose path ends with it."""
    bad = []
    for span in inline_code(text):
        for token in _PATH.findall(span):
            if token.startswith(("http", "//")) or token in ("/", "./"):
                continue
            pattern = token if token.startswith(("tests/", "docs/", "examples/", "bench/", "scripts/", "ptxforge/")) \
                else "*" + token
            if not any(p == token or fnmatch.fnmatchcase(p, pattern) and (p == token or p.endswith("/" + token)
                                                                            or "*" in token) for p in paths):
                bad.append(token)
    return sorted(set(bad))


_DOTTED = re.compile(r"\b(?:ptxforge|pf)(?:\.[A-Za-z_]\w*)+")


def resolve(dotted: str):
    """The object `ptxforge.a.b.c` names, importing submodules on the way; raises if there is none."""
    parts = dotted.split(".")
    obj, path = ptxforge, "ptxforge"
    for part in parts[1:]:
        path += "." + part
        if hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            obj = importlib.import_module(path)
    return obj


def unresolved_names(text: str) -> list[str]:
    """`ptxforge.x.y` / `pf.x` names a page mentions (prose, inline code and blocks) that do not exist."""
    bad = []
    for name in sorted(set(_DOTTED.findall(text))):
        name = "ptxforge" + name[name.index("."):]
        try:
            resolve(name)
        except (AttributeError, ImportError):
            bad.append(name)
    return bad


@pytest.mark.parametrize("page", PAGES)
def test_every_file_a_page_cites_exists(page):
    assert not missing_files(read(page)), f"{page} cites files that are not in the tree: {missing_files(read(page))}"


@pytest.mark.parametrize("page", PAGES)
def test_every_ptxforge_name_a_page_cites_exists(page):
    bad = unresolved_names(read(page))
    assert not bad, f"{page} names what ptxforge does not have: {bad}"


# --- commands and flags ---------------------------------------------------------------------------

def cli_commands(text: str) -> list[str]:
    """`ptxforge SUBCOMMAND ...` command lines of a page: in inline code, and lines of its bash blocks."""
    spans = [s for s in inline_code(text) if s.startswith("ptxforge ")]
    for block in fenced(text, "bash"):
        spans += [ln.split("#", 1)[0].strip() for ln in block.splitlines() if ln.startswith("ptxforge ")]
    return spans


def bad_cli_commands(text: str) -> list[str]:
    """The command lines that `ptxforge`'s own parser refuses, with what it said."""
    from ptxforge.cli import build_parser
    parser = build_parser()
    subcommands = next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    bad = []
    for line in cli_commands(text):
        words = shlex.split(line)[1:]
        if len(words) == 1:  # a command named in prose: `ptxforge to-python` writes ...
            if words[0] not in subcommands:
                bad.append(f"{line!r}: not a subcommand ({', '.join(subcommands)})")
            continue
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                build_parser().parse_args(words)
        except SystemExit as e:
            if e.code:  # --help exits with 0
                bad.append(f"{line!r}: {(err.getvalue().strip().splitlines() or ['refused'])[-1]}")
    return bad


def missing_script_flags(text: str) -> list[str]:
    """`--flag`s shown after an `examples/`, `bench/` or `scripts/` script that its source does not define."""
    bad = []
    for span in inline_code(text) + fenced(text, "bash"):
        for m in re.finditer(r"((?:examples|bench|scripts)/[\w/]+\.py)((?:\s+(?:--[\w-]+|[^\s`-][^\s`]*))*)", span):
            script = ROOT / m.group(1)
            if not script.exists():
                continue  # missing_files reports it
            src = script.read_text(encoding="utf-8")
            for flag in re.findall(r"(?<!\S)--[\w-]+", m.group(2)):
                if f'"{flag}"' not in src and f"'{flag}'" not in src:
                    bad.append(f"{m.group(1)} {flag}")
    return sorted(set(bad))


def test_the_readme_shows_ptxforge_commands():
    # the extraction must see the commands, or the test below passes on nothing
    assert {c.split()[1] for c in cli_commands(read("README.md"))} >= {"gemm-int4", "assemble", "lint"}


@pytest.mark.parametrize("page", PAGES)
def test_every_ptxforge_command_a_page_shows_parses(page):
    bad = bad_cli_commands(read(page))
    assert not bad, f"{page} shows ptxforge commands its parser refuses:\n  " + "\n  ".join(bad)


@pytest.mark.parametrize("page", PAGES)
def test_every_script_flag_a_page_shows_exists(page):
    bad = missing_script_flags(read(page))
    assert not bad, f"{page} shows flags its scripts do not define: {bad}"


# --- the README's saxpy listing ------------------------------------------------------------------

def listing_differences(text: str, listing: str) -> list[str]:
    """Numbered lines of the README's saxpy listing that differ from the example's listing."""
    m = re.search(r"Its listing \(`python examples/saxpy.py --listing`\):\n\n```\n(.*?)```", text, re.S)
    if m is None:
        return ["the README shows no listing of examples/saxpy.py"]
    real = listing.splitlines()
    shown = [(int(mm.group(1)), mm.group(0)) for mm in re.finditer(r"^ *(\d+) \|.*$", m.group(1), re.M)]
    if len(shown) < 20:
        return [f"only {len(shown)} numbered lines found in the README's listing"]
    return [f"README: {line.rstrip()!r}\nexample: {real[n - 1].rstrip() if n <= len(real) else None!r}"
            for n, line in shown if n > len(real) or line.rstrip() != real[n - 1].rstrip()]


def test_the_readme_listing_is_what_the_saxpy_example_prints():
    listing = load_example("saxpy").build().listing()
    bad = listing_differences(read("README.md"), listing)
    assert not bad, "README.md's saxpy listing is out of date (run python examples/saxpy.py --listing):\n" + \
        "\n".join(bad)


# --- the architecture page's list of isa/ -------------------------------------------------------------

def section_differences(text: str, heading: str, pattern: str, expected: set, *, extra_is_error: bool) -> list[str]:
    """What the Markdown section under `## heading` (a regex) leaves out of `expected`, its names being
    `pattern`'s groups; with `extra_is_error`, also the names it has that `expected` does not."""
    m = re.search(rf"^## {heading}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if m is None:
        return [f"no section {heading!r}"]
    named = set(re.findall(pattern, m.group(1)))
    return [f"not named: {x}" for x in sorted(expected - named)] + \
           [f"named but not there: {x}" for x in sorted(named - expected) if extra_is_error]


ISA_SECTION = r"The instruction set as data \(`ptxforge/isa/`\)"


def isa_table_differences(text: str, files: set) -> list[str]:
    """Files of ptxforge/isa/ the architecture page's `isa/` section leaves out, and files it lists that are not there."""
    return section_differences(text, ISA_SECTION, r"`(\w+\.py)`", files, extra_is_error=True)


def test_the_architecture_page_lists_every_file_of_isa():
    files = {p.name for p in (ROOT / "ptxforge" / "isa").glob("*.py") if p.name != "__init__.py"}
    bad = isa_table_differences(read("docs/architecture.md"), files)
    assert not bad, "docs/architecture.md's `isa/` section and ptxforge/isa/ differ: " + "; ".join(bad)


# --- docs/functions.md ----------------------------------------------------------------------------

def call_scope_difference(text: str) -> str | None:
    """Run the page's Python blocks in order in one namespace; the call scope the page shows after
    `k.call(...)`'s heading must be what the first block's module renders.  None when it is."""
    blocks = fenced(text, "python")
    ns: dict = {"__name__": "__docs__"}
    first_module = None
    for i, block in enumerate(blocks):
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(block, f"docs/functions.md[python block {i}]", "exec"), ns)
        if i == 0:
            first_module = ns["module"]
    m = re.search(r"^### `k\.call\(.*?\n```\n(.*?)```", text, re.S | re.M)
    if m is None:
        return "the page shows no call scope under k.call's heading"
    shown = [ln.strip() for ln in m.group(1).splitlines() if ln.strip()]
    ptx = [ln.strip() for ln in first_module.ptx.splitlines()]
    at = [i for i in range(len(ptx)) if ptx[i:i + len(shown)] == shown]
    return None if at else "shown:\n" + "\n".join(shown) + "\nrendered:\n" + first_module.ptx


def test_the_functions_page_runs_and_shows_the_call_scope_its_example_emits():
    text = read("docs/functions.md")
    assert len(fenced(text, "python")) >= 3
    diff = call_scope_difference(text)
    assert diff is None, f"docs/functions.md's call scope is not what its example emits: {diff}"


# --- docs/property-testing.md ---------------------------------------------------------------------

def mutant_kind_differences(text: str, kinds) -> list[str]:
    """The mutant kinds the guide lists against `ptxforge.testing.mutants.MUTANT_KINDS`."""
    m = re.search(r"Mutant kinds \(`ptxforge\.testing\.mutants\.MUTANT_KINDS`\):(.*?)`max_per_kind` limits", text, re.S)
    if m is None:
        return ["the guide has no list of mutant kinds"]
    listed = re.findall(r"`(\w+)`\s*\(", m.group(1))
    return [f"listed, not a kind: {k}" for k in listed if k not in kinds] + \
           [f"a kind the guide leaves out: {k}" for k in kinds if k not in listed]


def test_the_guide_lists_every_mutant_kind():
    from ptxforge.testing.mutants import MUTANT_KINDS
    bad = mutant_kind_differences(read("docs/property-testing.md"), list(MUTANT_KINDS))
    assert not bad, bad


def failure_report_difference(text: str, printed: str) -> str | None:
    m = re.search(r"^```\n(kernel transpose fails on problem.*?)^```", text, re.S | re.M)
    if m is None:
        return "the guide shows no failure report"
    return None if m.group(1).rstrip() == printed.rstrip() else f"shown:\n{m.group(1)}\nprinted:\n{printed}"


def test_the_guides_failure_report_is_what_check_raises(tmp_path):
    text = read("docs/property-testing.md")
    space = fenced(text, "python")[1]
    script = tmp_path / "failure.py"
    # the guide says this run used the library's copy of the kernel
    script.write_text(space + "\nfrom ptxforge.testing import PropertyFailure, check\n"
                      "from ptxforge.testing.kernels import transpose\n"
                      "from ptxforge.testing.mutants import drop_bar_sync\n"
                      "try:\n    check(drop_bar_sync(transpose().kernel('transpose')), space)\n"
                      "except PropertyFailure as e:\n    print(e)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("HYPOTHESIS_PROFILE", None)  # as a user runs it: Hypothesis's defaults
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    diff = failure_report_difference(text, r.stdout.replace(f"{ROOT}/", ""))
    assert diff is None, f"docs/property-testing.md's failure report is out of date: {diff}"


# --- docstrings of the public names ---------------------------------------------------------------

def public_names() -> list[str]:
    return sorted((set(ptxforge.__all__) | ptxforge._SCHEDULE_NAMES) - {"__version__", "KernelBuilder"})


def failing_docstring_examples(objects: dict) -> list[str]:
    finder, failed = doctest.DocTestFinder(recurse=False), []
    for name, obj in objects.items():
        for test in finder.find(obj, f"ptxforge.{name}", globs={}):
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            with contextlib.redirect_stdout(io.StringIO()) as out:
                runner.run(test)
            if runner.summarize(verbose=False).failed:
                failed.append(f"{name}:\n{out.getvalue()}")
    return failed


def test_the_docstring_examples_of_the_public_names_run():
    objects = {n: getattr(ptxforge, n) for n in public_names()}
    objects = {n: o for n, o in objects.items() if isinstance(o, type) or callable(o)}  # not the types
    with_examples = [n for n, o in objects.items()
                     if any(t.examples for t in doctest.DocTestFinder(recurse=False).find(o, n, globs={}))]
    assert "FunctionBuilder" in with_examples, f"the walk found no docstring example to run: {with_examples}"
    bad = failing_docstring_examples(objects)
    assert not bad, "docstring examples that fail:\n" + "\n".join(bad)


# --- the checks can fail ----------------------------------------------------------------------------

def test_each_check_fails_on_a_broken_page():
    readme, arch = read("README.md"), read("docs/architecture.md")
    funcs, guide = read("docs/functions.md"), read("docs/property-testing.md")
    assert missing_files("see `isa/no_such_family.py` and `tests/test_nothing_*.py`") == \
        ["isa/no_such_family.py", "tests/test_nothing_*.py"]
    assert not missing_files("see `isa/arith.py`, `tests/test_isa_*_audit.py` and `bench/results/`")
    assert unresolved_names("`ptxforge.isa.arith.NO_SUCH_TABLE` and `pf.KernelBuilder`") == \
        ["ptxforge.isa.arith.NO_SUCH_TABLE"]
    assert bad_cli_commands("`ptxforge lint k.ptx --arch sm_90 --no-such-flag`")
    assert bad_cli_commands("`ptxforge disassemble`")
    assert not bad_cli_commands("`ptxforge lint k.ptx --arch sm_90`, `ptxforge to-python`, `ptxforge interp --help`")
    assert missing_script_flags("`python examples/saxpy.py --listing --no-such-flag`") == \
        ["examples/saxpy.py --no-such-flag"]
    listing = load_example("saxpy").build().listing()
    assert listing_differences(readme.replace("// examples/saxpy.py:3", "// examples/saxpy.py:9"), listing)
    files = {p.name for p in (ROOT / "ptxforge" / "isa").glob("*.py") if p.name != "__init__.py"}
    assert isa_table_differences(arch, files | {"new_family.py"}) == ["not named: new_family.py"]
    broken = funcs.replace("ld.param.f32    %f1, [call0_r0];", "ld.param.f32    %f7, [call0_r0];", 1)
    assert call_scope_difference(broken) is not None
    from ptxforge.testing.mutants import MUTANT_KINDS
    assert mutant_kind_differences(guide, [*MUTANT_KINDS, "swap_operands"]) == \
        ["a kind the guide leaves out: swap_operands"]
    assert failure_report_difference(guide, "kernel transpose fails on problem rows=2, cols=2") is not None

    stack = STATED[0]
    assert _stated(funcs.replace("stack (8 KiB", "stack (16 KiB"), stack[1]) == "16" != stack[2]()

    def wrong():
        """>>> 1 + 1
        3
        """
    assert failing_docstring_examples({"wrong": wrong})


# --- the README's layout ----------------------------------------------------------------------------

def layout_differences(text: str, units: set, pages: set) -> list[str]:
    """Top-level units of ptxforge/ and pages of docs/ that the README's Layout section leaves out."""
    return section_differences(text, "Layout", r"`(?:docs/)?([\w.-]+(?:\.py|\.md|/))`", units | pages,
                               extra_is_error=False)


def test_the_readme_layout_names_every_unit_and_page():
    package = ROOT / "ptxforge"
    units = {p.name + ("/" if p.is_dir() else "") for p in package.iterdir()
             if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.name not in ("__init__.py", "__main__.py")}
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert "runtime/" in units and "builder.py" in units and "parse.md" in pages
    bad = layout_differences(read("README.md"), units, pages)
    assert not bad, f"README.md's Layout section is out of date: {bad}"
    assert layout_differences(read("README.md"), units | {"new_unit.py"}, pages) == ["not named: new_unit.py"]


# --- numbers the pages state ------------------------------------------------------------------------

def _signature_default(func, name):
    import inspect
    return inspect.signature(func).parameters[name].default


def _stated(text: str, pattern: str):
    """The number a page states where `pattern` (one group) matches; None where the sentence is gone."""
    m = re.search(pattern, " ".join(text.split()))
    return None if m is None else m.group(1)


# (page, the sentence with the number as its group, what the code has, as the page writes it)
STATED = [
    ("docs/functions.md", r"`alloca` takes from a per-thread stack \((\d+) KiB",
     lambda: str(importlib.import_module("ptxforge.interp.memory").STACK_BYTES // 1024)),
    ("docs/property-testing.md", r"`max_per_kind=(\d+)` \(the default\)",
     lambda: str(_signature_default(importlib.import_module("ptxforge.testing").mutation_check, "max_per_kind"))),
    ("docs/property-testing.md", r"the default (\d+) fresh random problems",
     lambda: str(_signature_default(importlib.import_module("ptxforge.testing").mutation_check, "max_examples"))),
    ("docs/property-testing.md", r"`backends=\"(\w+)\"` \(the default\)",
     lambda: _signature_default(importlib.import_module("ptxforge.testing").check, "backends")),
    ("docs/isa.md", r"more than (\d+) bytes of parameters are refused",
     lambda: str(importlib.import_module("ptxforge.kernel").PARAM_BYTES_MAX)),
    ("docs/isa.md", r"parameters over (\d+) bytes to 8\.1",
     lambda: str(importlib.import_module("ptxforge.kernel").PARAM_BYTES_BASE)),
    ("docs/isa.md", r"above (2\^20 - 16) bytes \(`BULK_SIZE_MAX`",
     lambda: "2^20 - 16" if importlib.import_module("ptxforge.isa.async_copy").BULK_SIZE_MAX == 2**20 - 16 else "other"),
    ("README.md", r"The split is taken when a tile streams at least (\d+) KB over K",
     lambda: str(importlib.import_module("ptxforge.schedules.hopper.splitk").MIN_SPLIT_TILE_BYTES["kernel"] >> 10)),
    ("README.md", r"A plan keeps the encoded tensor maps of up to (\d+) buffers per operand",
     lambda: str(importlib.import_module("ptxforge.schedules.hopper.plan")._TMAP_CACHE)),
]


@pytest.mark.parametrize("page,pattern,actual", STATED, ids=[f"{p}:{s[:40]}" for p, s, _ in STATED])
def test_the_numbers_the_pages_state_are_the_codes(page, pattern, actual):
    stated = _stated(read(page), pattern)
    assert stated is not None, f"{page} no longer says {pattern!r}: update this test's STATED with what it says now"
    assert stated == actual(), f"{page} states {stated} where the code has {actual()} ({pattern!r})"


# --- the README's error messages --------------------------------------------------------------------

def test_the_readme_error_is_what_the_builder_raises(tmp_path, monkeypatch):
    import runpy
    text = read("README.md")
    m = re.search(r"^```\nptxforge\.errors\.ValidationError: (.*?)\n  at err\.py:5: (.*?)\n```", text, re.S | re.M)
    assert m, "README.md no longer shows the mma fragment error of err.py"
    message, line5 = m.groups()
    (tmp_path / "err.py").write_text(
        "import ptxforge as pf\n"
        "k = pf.KernelBuilder('m', target='sm_80')\n"
        "a = [k.reg(pf.b32) for _ in range(3)]\n"
        "b = [k.reg(pf.b32) for _ in range(2)]\n"
        f"{line5}\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ptxforge.ValidationError) as info:
        runpy.run_path("err.py")
    assert str(info.value) == f"{message}\n  at err.py:5: {line5}"

    quoted = re.search(r"an illegal `cp\.async` width \(`([^`]+)`\)", text)
    assert quoted, "README.md no longer quotes the cp.async width error"
    k = ptxforge.KernelBuilder("w", target="sm_80")
    with pytest.raises(ptxforge.ValidationError, match=re.escape(quoted.group(1))):
        k.cp_async(k.shared("s", 64), k.param_ptr("p", ptxforge.u8), 8, cache="cg")


def test_the_least_versions_the_architecture_page_states_are_the_modules():
    m = re.search(r"sm_80 work gets (\d\.\d), sm_90 (\d\.\d), sm_90a (\d\.\d)", " ".join(read("docs/architecture.md").split()))
    assert m, "docs/architecture.md no longer states the least .version of sm_80, sm_90 and sm_90a work"
    least = [str(ptxforge.Module([ptxforge.KernelBuilder("k", target=t)]).least_version())
             for t in ("sm_80", "sm_90", "sm_90a")]
    assert list(m.groups()) == least, f"docs/architecture.md states {m.groups()}; an empty kernel gets {least}"


# --- what to-python refuses ---------------------------------------------------------------------------

_HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n\n"
_ENTRY = ".visible .entry k()\n{\n%s\n    ret;\n}\n"
#: One PTX module per kind of line docs/functions.md says `ptxforge to-python` refuses (or writes back).
TO_PYTHON_PROBES = {
    ".weak": ".weak .func f()\n{\n    ret;\n}\n" + _ENTRY % "    call f;",
    "other `.loc` forms": '.file 1 "k.cu"\n' + _ENTRY % "    .loc 1 5 3, inlined_at 1 2 3",
    "multi-dimensional": _ENTRY % "    .local .align 4 .b32 a[2][3];",
    "initialized": _ENTRY % "    .local .b32 a[2] = {1, 2};",
    "vector `.local`": _ENTRY % "    .local .v2 .b32 a[2];",
    "`.reg` parameters": ".func (.reg .b32 %r) f(.reg .b32 %a)\n{\n    mov.b32 %r, %a;\n    ret;\n}\n"
                         + _ENTRY % "    .reg .b32 %x;\n    call (%x), f, (1);",
    "`.alias`": ".func f()\n{\n    ret;\n}\n.func g();\n.alias g, f;\n" + _ENTRY % "    call g;",
    "`debug_loc` writes": '.file 1 "k.cu"\n' + _ENTRY % "    .loc 1 5 3",
    "scoped `.reg` list": _ENTRY % "    {\n    .reg .b32 %t<2>;\n    mov.b32 %t0, 1;\n    }",
}


def to_python_claim_differences(text: str) -> list[str]:
    """The probes of the kinds the page lists after "It refuses what has no builder call" that to-python
    writes anyway, the probes of what it says comes back that to-python refuses, and listed kinds with no probe."""
    from ptxforge.parse import parse
    from ptxforge.parse.to_python import to_python
    flat = " ".join(text.split())
    m = re.search(r"It refuses what has no builder call[^:]*: (.*?)\(module-scope", flat)
    if m is None:
        return ["docs/functions.md no longer lists what to-python refuses"]
    refused_list, bad = m.group(1), []
    for item in re.split(r", | and ", refused_list.rstrip(" ")):
        if not any(key in item for key in TO_PYTHON_PROBES):
            bad.append(f"no probe for the listed {item!r}: add one to TO_PYTHON_PROBES")
    for key, body in TO_PYTHON_PROBES.items():
        try:
            to_python(parse(_HEADER + body, filename="probe.ptx"))
            refused = False
        except ptxforge.PtxforgeError:
            refused = True
        if key in refused_list and not refused:
            bad.append(f"the page says to-python refuses {key}, and it writes it")
        elif key not in refused_list and key in flat and refused:
            bad.append(f"the page says {key} comes back, and to-python refuses it")
    return bad


def test_what_the_functions_page_says_to_python_refuses_is_refused():
    bad = to_python_claim_differences(read("docs/functions.md"))
    assert not bad, bad
