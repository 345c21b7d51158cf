"""Sphinx configuration of the ptxforge API reference (``docs/api/``).

Build it from the repository root with ``python -m sphinx -W --keep-going -b html docs/api <out>``;
``tests/test_docs.py`` does that in CI, so a broken reference or a module that fails to import
fails the suite. Every page comes from the package's docstrings: ``index.rst`` asks autosummary
for the whole package, recursively, and the template in ``_templates/autosummary/module.rst``
gives each module one page with its public members.
"""

import re
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
if (_ROOT / "ptxforge" / "__init__.py").exists():
    sys.path.insert(0, str(_ROOT))

import ptxforge  # noqa: E402

project = "ptxforge"
release = version = ptxforge.__version__
copyright = "the ptxforge authors"

extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary", "sphinx.ext.napoleon"]
templates_path = ["_templates"]
exclude_patterns = ["_build"]

autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "none"            # signatures stay as written; the docstrings say what is legal
autodoc_inherit_docstrings = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# `name` in a docstring means code, as it does in the rest of the project's text.
default_role = "code"

html_theme = "alabaster"
html_static_path = []
html_theme_options = {"nosidebar": False}

# The package's docstrings are plain text with `code` in backticks. Three plain-text habits mean
# something else in reST: `|a|` (a substitution), a trailing underscore as in if_ or and_ (a
# hyperlink reference), and an indented example after a paragraph (a block quote, whose own
# indentation then breaks it). Outside code spans, doctest lines and literal blocks the first two
# are escaped, and an indented block after a blank line becomes a literal block, so the
# docstrings stay readable in the source and in help() and the reference builds without warnings.
_CODE_SPAN = re.compile(r"(``.+?``|`[^`]+`)")
_TRAILING_UNDERSCORE = re.compile(r"(?<=[A-Za-z0-9])_(?=[\s,.;:)\]'\"]|$)")


def _escape_plain(text: str) -> str:
    parts = _CODE_SPAN.split(text)
    for i in range(0, len(parts), 2):
        parts[i] = _TRAILING_UNDERSCORE.sub(r"\\_", parts[i].replace("|", r"\|"))
    return "".join(parts)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _escape_docstring(app, what, name, obj, options, lines):
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
        if prev_blank and out and _indent(line) > para_indent and not stripped.startswith((">>>", ":")):
            last = next(x for x in reversed(out) if x.strip())
            if not last.rstrip().endswith("::") and not last.lstrip().startswith(".."):
                out.extend([" " * para_indent + "::", ""])
                literal_indent = para_indent
                out.append(line)
                prev_blank = False
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


def setup(app):
    app.connect("autodoc-process-docstring", _escape_docstring)
