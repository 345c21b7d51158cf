"""A `;` missing between two instructions.

The lexer ends a statement at `;`, so an instruction written without one runs on into the next line's
instruction, and the reader would refuse the joined statement for an operand (`%rd2 add.u64 %rd3 is not
declared`).  On a statement that failed to read, `missing_semicolon` looks for what gives that away (a
mnemonic, a guard or a body directive where an operand separator belongs) and names the line on which the
first instruction should have ended.  It runs only on statements already refused, so it costs nothing on
PTX that reads.
"""

from __future__ import annotations

import re

from .decode import DECODERS
from .lexer import _blank_block_comments, _strip_comment
from .operands import split_top

_PTXFORGE_INTERNAL = True

_GUARD = re.compile(r"@!?%?[A-Za-z_$][\w$]*\Z")
_MNEMONIC = re.compile(r"[A-Za-z_][\w.:]*\Z")
_LABEL_ONLY = re.compile(r"\s*[A-Za-z_$][\w$]*\s*:\s*\Z")
_BODY_DIRECTIVES = frozenset((".reg", ".shared", ".local", ".param", ".pragma", ".global", ".const"))


def starts_statement(word: str) -> bool:
    """Whether `word` can only begin a statement: an instruction's mnemonic, a guard or a body directive."""
    if word in _BODY_DIRECTIVES or _GUARD.match(word):
        return True
    return _MNEMONIC.match(word) is not None and word.split(".", 1)[0] in DECODERS


def _top_words(operand: str) -> list:
    """The whitespace-separated words of an operand, outside (), [] and {}."""
    words, depth, start = [], 0, None
    for i, ch in enumerate(operand + " "):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch.isspace() and depth <= 0:
            if start is not None:
                words.append(operand[start:i])
                start = None
        elif start is None:
            start = i
    return words


def _token(word: str):
    return re.compile(r"(?<![\w.$%@!])" + re.escape(word) + r"(?![\w.$:])")


def _next_statement(head: str, rest: str):
    """(the word that starts a second statement inside this one, how many times that word occurs before it in
    the statement), or None.  `head` is the statement's text up to its operands `rest`."""
    for i, op in enumerate(split_top(rest)):
        words = _top_words(op)
        for j, w in enumerate(words):
            if (j > 0 or (i == 0 and len(words) > 1)) and starts_statement(w):
                pattern = _token(w)
                before = head + " " + ", ".join(split_top(rest)[:i]) + " " + " ".join(words[:j])
                return w, len(pattern.findall(before))
    return None


def missing_semicolon(source: str, line: int, head: str, rest: str):
    """(the line that should end with `;`, the message) when the statement that starts on `line` of `source`
    is two instructions with no `;` between them, else None.  `head` is the statement's text before its
    operands `rest` (guard and mnemonic)."""
    found = _next_statement(head, rest)
    if found is None:
        return None
    word, seen = found
    what = "directive" if word.startswith(".") else "instruction"
    pattern = _token(word)
    lines = (_blank_block_comments(source) if "/*" in source else source).split("\n")
    code_lines = []  # (line number, code) of the statement's lines so far
    for number in range(line, len(lines) + 1):
        code = _strip_comment(lines[number - 1])[0]
        for m in pattern.finditer(code):
            if seen:
                seen -= 1
                continue
            if code[:m.start()].strip() and not _LABEL_ONLY.match(code[:m.start()]):
                return number, f"missing ';' before '{word}', which starts the next {what}"
            end = next((n for n, c in reversed(code_lines) if c.strip()), line)
            return end, f"missing ';' at the end of this line: '{word}' on line {number} starts the next {what}"
        code_lines.append((number, code))
    return None
