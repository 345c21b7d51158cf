"""Hypothesis strategies for PTX text a reader must survive: real files with a few lines damaged.

`mutated_ptx(texts)` draws one of `texts` and applies one to three edits (a character dropped or
inserted, a line deleted, duplicated or with its words shuffled).  `ptxforge.parse` must either read
the result or refuse it with a `PtxforgeError` naming a line; any other exception is a reader bug.
"""

from __future__ import annotations

from hypothesis import strategies as st

#: Characters that change the meaning of PTX when inserted.
PUNCTUATION = "{}[](),;.%@!:+-0x_ "


@st.composite
def mutated_ptx(draw, texts) -> str:
    """One of `texts` with one to three random edits."""
    lines = draw(st.sampled_from(list(texts))).split("\n")
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        line = lines[i]
        edit = draw(st.sampled_from(("drop", "insert", "delete", "duplicate", "shuffle")))
        if edit == "drop" and line:
            j = draw(st.integers(0, len(line) - 1))
            lines[i] = line[:j] + line[j + 1:]
        elif edit == "insert":
            j = draw(st.integers(0, len(line)))
            lines[i] = line[:j] + draw(st.sampled_from(PUNCTUATION)) + line[j:]
        elif edit == "delete" and len(lines) > 1:
            del lines[i]
        elif edit == "duplicate":
            lines.insert(i, draw(st.sampled_from(lines)))
        elif edit == "shuffle":
            words = line.split()
            lines[i] = " ".join(draw(st.permutations(words))) if words else line
    return "\n".join(lines)
