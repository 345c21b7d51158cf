"""PTX text -> statements with their line numbers.

A statement is what ends with `;` (its text "" when nothing comes before the `;`), a scope brace,
a function header (up to its body's `{`), a label, a full-line comment, or a line-oriented
directive (`.loc`, `.file`, `@@DWARF`, a whole `.section { ... }` block).  Comments are dropped from statements; full-line comments are kept
(as ``COMMENT``) so a body's comments survive a round trip.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_PTXFORGE_INTERNAL = True

STMT, OPEN, CLOSE, HEADER, LABEL, COMMENT, LINE = "stmt", "open", "close", "header", "label", "comment", "line"

_LABEL = re.compile(r"([A-Za-z_$][\w$]*)\s*:(?!:)\s*")
_LINE_DIRECTIVES = frozenset((".version", ".target", ".address_size", ".loc", ".file", "@@DWARF", ".section"))
_HEADER_WORDS = frozenset((".entry", ".func"))
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
#: directive words written with no space between them (`.reg.b32`, `.visible.entry`, `.param.u64`): each `.word`
#: is a token of its own in PTX, and ptxas (and the header inline asm of cuda_fp16.h) writes them so
_GLUED = re.compile(r"(?<![\w$%.])\.[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def _unglue(text: str) -> str:
    """`text` (a directive or a function header) with glued directive words spaced: `.reg.b32 f` -> `.reg .b32 f`.
    Only words that start with a `.` split, so register components (`%r1.x`) and numbers (`1.5`) stay whole."""
    if text.count(".") < 2:
        return text
    if '"' in text:  # (a string, `.pragma "..."`, is left as written)
        parts = text.split('"')
        return '"'.join(_unglue(p) if i % 2 == 0 else p for i, p in enumerate(parts))
    return _GLUED.sub(lambda m: m.group(0).replace(".", " .")[1:], text)


class Statement(NamedTuple):
    """One unit of PTX: its kind (STMT, OPEN, ...), its text (comments removed) and 1-based line."""

    kind: str
    text: str
    line: int


def _strip_comment(line: str):
    """(code, comment or None) of one line; `//` inside a string literal is code."""
    i = line.find("//")
    if i < 0:
        return line, None
    if '"' not in line[:i]:
        return line[:i], line[i + 2:]
    quoted = False
    for j, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch == "/" and line.startswith("//", j):
            return line[:j], line[j + 2:]
    return line, None


def _blank_block_comments(text: str) -> str:
    """Replace /* ... */ by spaces, keeping the newlines (so line numbers stay)."""
    return _BLOCK_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _is_header(text: str) -> bool:
    head = _unglue(text.split("(", 1)[0]).split()
    return any(w in _HEADER_WORDS for w in head)


def statements(text: str) -> list:
    """Split PTX text into `Statement`s, in order."""
    if "/*" in text:
        text = _blank_block_comments(text)
    out = []
    append = out.append
    buf: list = []  # pieces of the statement being read
    buf_line = 0
    depth = 0  # (), [] and {} nesting inside the statement
    section: list | None = None  # lines of a .section { ... } block
    section_depth = 0
    section_line = 0
    for lineno, raw in enumerate(text.split("\n"), 1):
        if section is not None:
            section.append(raw.rstrip())
            section_depth += raw.count("{") - raw.count("}")
            if section_depth <= 0:
                append(Statement(LINE, "\n".join(section), section_line))
                section = None
            continue
        code, comment = _strip_comment(raw)
        s = code.strip()
        if not s:
            if comment is not None and not buf:
                append(Statement(COMMENT, comment.strip(), lineno))
            continue
        if not buf:
            m = _LABEL.match(s) if ":" in s else None
            if m is not None:
                append(Statement(LABEL, m.group(1), lineno))
                s = s[m.end():]
                if not s:
                    continue
            if (s[0] == "." or s[0] == "@") and s.split(None, 1)[0] in _LINE_DIRECTIVES:
                if s.startswith(".section"):
                    if "{" not in s and "}" not in s:
                        section, section_depth, section_line = [code.rstrip()], 0, lineno
                        continue
                    section_depth = s.count("{") - s.count("}")
                    if section_depth > 0:
                        section, section_line = [code.rstrip()], lineno
                        continue
                append(Statement(LINE, s.rstrip(), lineno))  # (a ';' after it is kept: the reader refuses it)
                continue
            # the common case: one whole statement on one line (a lone ';' is an empty statement)
            c0 = s[0]
            if s[-1] == ";" and c0 != "{" and c0 != "}" and s.count(";") == 1:
                append(Statement(STMT, _unglue(s[:-1].strip()) if c0 == "." else s[:-1].strip(), lineno))
                continue
        # the general case: scan characters
        i, n = 0, len(s)
        start = 0
        while i < n:
            ch = s[i]
            if ch == '"':
                j = s.find('"', i + 1)
                i = n if j < 0 else j + 1
                continue
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif ch == ";" and depth <= 0:
                piece = s[start:i]
                if piece.strip():
                    if not buf:
                        buf_line = lineno
                    buf.append(piece)
                stmt = " ".join(p.strip() for p in buf if p.strip())
                if stmt[:1] == ".":
                    stmt = _unglue(stmt)
                append(Statement(STMT, stmt, buf_line if stmt else lineno))  # "": an empty statement
                buf, depth, start = [], 0, i + 1
            elif ch == "{":
                pending = " ".join(p.strip() for p in buf + [s[start:i]] if p.strip())
                if not pending:
                    append(Statement(OPEN, "{", lineno))
                    buf, start = [], i + 1
                elif depth <= 0 and _is_header(pending):
                    append(Statement(HEADER, _unglue(pending), buf_line if buf else lineno))
                    append(Statement(OPEN, "{", lineno))
                    buf, depth, start = [], 0, i + 1
                else:
                    depth += 1
            elif ch == "}":
                pending = " ".join(p.strip() for p in buf + [s[start:i]] if p.strip())
                if not pending and depth <= 0:
                    append(Statement(CLOSE, "}", lineno))
                    buf, start = [], i + 1
                else:
                    depth -= 1
            i += 1
        rest = s[start:]
        if rest.strip():
            if not buf:
                buf_line = lineno
                m = _LABEL.match(rest.strip())
                if m is not None and depth <= 0:
                    append(Statement(LABEL, m.group(1), lineno))
                    rest = rest.strip()[m.end():]
                    if not rest:
                        continue
            buf.append(rest)
    if section is not None:
        append(Statement(LINE, "\n".join(section), section_line))
    if buf and " ".join(buf).strip():
        append(Statement(STMT, " ".join(p.strip() for p in buf), buf_line))
    return out
