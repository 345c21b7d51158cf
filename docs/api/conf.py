"""Sphinx configuration of the ptxforge API reference (``docs/api/``).

Build it from the repository root with ``python -m sphinx -W --keep-going -b html docs/api <out>``;
``tests/test_docs.py`` does that in CI, so a broken reference or a module that fails to import
fails the suite. Every page comes from the package's docstrings: ``index.rst`` asks autosummary
for the whole package, recursively, and the template in ``_templates/autosummary/module.rst``
gives each module one page with its public members.
"""

import inspect
import re
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
if (_ROOT / "ptxforge" / "__init__.py").exists():
    sys.path.insert(0, str(_ROOT))

import importlib  # noqa: E402
import pkgutil  # noqa: E402

import ptxforge  # noqa: E402

project = "ptxforge"
release = version = ptxforge.__version__
copyright = "the ptxforge authors"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary"]
templates_path = ["_templates"]
exclude_patterns = ["_build"]

autosummary_generate = True


def _exports() -> tuple[dict, dict]:
    """For each public package: the classes and functions its ``__all__`` exports from its modules
    (its page lists them in a table linking to the page of the module that defines and describes
    each), and those it defines itself (described on its own page)."""
    names = ["ptxforge"] + [info.name for info in pkgutil.walk_packages(ptxforge.__path__, "ptxforge.")
                            if info.ispkg and not any(p.startswith("_") for p in info.name.split("."))]
    exported, own = {}, {}
    for name in names:
        mod = importlib.import_module(name)
        objs = [getattr(mod, n) for n in getattr(mod, "__all__", ())]
        objs = [o for o in objs if inspect.isclass(o) or inspect.isfunction(o)]
        exported[name] = [f"~{o.__module__.removeprefix(name + '.')}.{o.__qualname__}"
                          for o in objs if o.__module__ != name]
        own[name] = [o.__name__ for o in objs if o.__module__ == name]
    return exported, own


_EXPORTED, _OWN = _exports()
#: modules whose classes are documented with the methods they inherit: KernelBuilder takes its instruction
#: methods from the per-family mixins of ptxforge.isa, and its page is where a user looks for them
_INHERITED = ["ptxforge.builder"]
autosummary_context = {"exports": _EXPORTED, "own": _OWN, "inherited": _INHERITED}
autosummary_imported_members = False
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "none"            # signatures stay as written; the docstrings say what is legal
autodoc_inherit_docstrings = True
autodoc_preserve_defaults = True      # defaults as written (a table name, not its repr)

# `name` in a docstring means code, as it does in the rest of the project's text.
default_role = "code"

html_theme = "alabaster"
html_static_path = []
html_theme_options = {"nosidebar": False}
html_sidebars = {"**": ["searchbox.html"]}   # no whole-tree navigation on each of ~120 pages

# The package's docstrings are plain text, written for help() and the source as much as for this
# reference: `code` in backticks, Google-style sections (Args:, Attributes:, Fields:, Returns: ...)
# whose entries continue on more-indented lines, examples indented after a paragraph. A few
# plain-text habits mean something else in reST, so every docstring passes through
# `_plain_to_rest` before autodoc renders it:
#
# * a section header followed by an indented block becomes a field list (Args, Attributes, Fields)
#   or a rubric with its text (Returns, Raises, Example ...), continuation lines joined;
# * an indented block after a blank line, outside a section, becomes a literal block;
# * a more-indented line that continues the line above it is joined to it;
# * outside code spans, doctest lines and literal blocks, `|a|` (a substitution), `*` and `**`
#   (emphasis; a leading bullet stays), backslashes and a trailing underscore as in if_ or and_
#   (a hyperlink reference) are escaped, and a code span touching a word (`Mutant`s) is split off.
#
# sphinx.ext.napoleon does the first for Google-style docstrings, but it also reads the first line
# of every property docstring as "type: description", which plain text does not mean.
_CODE_SPAN = re.compile(r"(``.+?``|`[^`]+`)")
_TRAILING_UNDERSCORE = re.compile(r"(?<=[A-Za-z0-9])_(?=\W|$)")
_SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters|Keyword Args|Keyword Arguments|Attributes|Fields|"
                      r"Returns|Return|Yields|Raises|Example|Examples|Note|Notes|See Also):\s*$")
_FIELD_KIND = {"Args": "param", "Arguments": "param", "Parameters": "param", "Keyword Args": "keyword",
               "Keyword Arguments": "keyword", "Attributes": "ivar", "Fields": "ivar"}
_ENTRY = re.compile(r"^([A-Za-z_*][\w.*, ]*?)(?:\s*\(([^)]*)\))?\s*:\s+(.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _escape_plain(text: str) -> str:
    bullet = re.match(r"\s*[*-] ", text)
    head, text = (text[:bullet.end()], text[bullet.end():]) if bullet else ("", text)
    parts = _CODE_SPAN.split(text)
    for i in range(0, len(parts), 2):
        plain = parts[i].replace("\\", "\\\\").replace("|", r"\|").replace("*", r"\*")
        parts[i] = _TRAILING_UNDERSCORE.sub(r"\\_", plain)
    for i in range(1, len(parts), 2):                  # `Mutant`s, a`b`: a code span needs a word break
        if parts[i + 1][:1].isalnum():
            parts[i] += "\\ "
        if parts[i - 1][-1:].isalnum():
            parts[i] = "\\ " + parts[i]
    return head + "".join(parts)


def _join_continuations(block: list[str]) -> list[str]:
    """Entries of a section: each line at the block's own indentation starts one, deeper lines continue it."""
    base = min(_indent(x) for x in block if x.strip())
    entries: list[str] = []
    for line in block:
        if not line.strip():
            continue
        if _indent(line) <= base or not entries:
            entries.append(line.strip())
        else:
            entries[-1] += " " + line.strip()
    return entries


def _sections(lines: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(lines):
        m = _SECTION.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        head_indent, name = len(m.group(1)), m.group(2)
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > head_indent):
            j += 1
        block = lines[i + 1:j]
        while block and not block[-1].strip():
            block.pop()
        if not any(x.strip() for x in block):           # a header with nothing under it: plain text
            out.append(lines[i])
            i += 1
            continue
        pad = " " * head_indent
        if out and out[-1].strip():
            out.append("")
        if name in _FIELD_KIND:
            for entry in _join_continuations(block):
                e = _ENTRY.match(entry)
                if e:
                    out.append(f"{pad}:{_FIELD_KIND[name]} {e.group(1).strip()}: {e.group(3)}")
                else:
                    out.append(f"{pad}* {entry}")
        elif name in ("Example", "Examples") and not block[0].lstrip().startswith(">>>"):
            out += [f"{pad}.. rubric:: {name}", "", f"{pad}::", ""] + block
        else:
            base = min(_indent(x) for x in block if x.strip())
            out += [f"{pad}.. rubric:: {name}", ""] + [pad + x[base:] if x.strip() else "" for x in block]
        out.append("")
        i = j
    return out


def _plain_to_rest(app, what, name, obj, options, lines):
    lines[:] = _sections(list(lines))
    out, literal_indent, para_indent, prev_blank = [], None, 0, True
    for line in lines:
        if literal_indent is not None:
            if not line.strip() or _indent(line) > literal_indent:
                out.append(line)
                continue
            literal_indent = None
        if not line.strip():
            out.append(line)
            prev_blank = True
            continue
        stripped = line.lstrip()
        last = next((x for x in reversed(out) if x.strip()), "")
        deeper = _indent(line) > para_indent and not stripped.startswith((">>>", ":"))
        directive = last.lstrip().startswith(("..", ":")) or last.rstrip().endswith("::")
        if deeper and prev_blank and out and not directive:
            out.extend([" " * para_indent + "::", ""])     # an indented example: a literal block
            literal_indent = para_indent
            out.append(line)
            prev_blank = False
            continue
        if deeper and not prev_blank and out and not directive and not last.lstrip().startswith((">>>", "...")):
            idx = max(k for k, x in enumerate(out) if x.strip())
            out[idx] = out[idx].rstrip() + " " + _escape_plain(stripped)   # a continuation line
            continue
        prev_blank = False
        para_indent = _indent(line)
        if stripped.startswith((">>>", "...")):
            out.append(line)
            continue
        out.append(_escape_plain(line))
        if line.rstrip().endswith("::"):
            literal_indent = para_indent
    lines[:] = out


class _Shown:
    """A default value shown by name: its repr is the given text."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _short_signature(app, what, name, obj, options, signature, return_annotation):
    """A default whose repr is long (a whole table of forms) is shown by its module-level name, or
    as ``...``: such signatures are unreadable, and docutils parses their text in quadratic time."""
    if not signature or len(signature) < 300:
        return None
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    names = {id(v): k for k, v in vars(module).items() if not k.startswith("_")} if module else {}
    params = []
    for p in sig.parameters.values():
        if p.default is not p.empty and len(repr(p.default)) > 60:
            p = p.replace(default=_Shown(names.get(id(p.default), "...")))
        params.append(p.replace(annotation=p.empty))
    return str(sig.replace(parameters=params, return_annotation=sig.empty)), return_annotation


def setup(app):
    app.connect("autodoc-process-signature", _short_signature)
    app.connect("autodoc-process-docstring", _plain_to_rest)
