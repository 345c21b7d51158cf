"""Assert that a ptxforge error points at the user's line.

Mark the line that should be blamed with a comment and pass the marker::

    with pytest.raises(ptxforge.ValidationError) as info:
        k.cp_async(dst, src, 2)  # <- two-bytes
    assert_located(info.value, "<- two-bytes", __file__)
"""

from __future__ import annotations

import os


def marked_line(path: str, marker: str) -> int:
    """The 1-based number of the only line of `path` that ends with the comment `# <marker>`."""
    tag = "# " + marker
    with open(path) as f:
        hits = [i for i, line in enumerate(f, 1) if line.rstrip().endswith(tag)]
    if len(hits) != 1:
        raise AssertionError(f"marker {marker!r} is on {len(hits)} lines of {path}; mark exactly one")
    return hits[0]


def assert_located(err, marker: str, path: str) -> None:
    """`err.loc` is the marked line of `path`, and the message shows it as file:line."""
    line = marked_line(path, marker)
    loc = getattr(err, "loc", None)
    assert loc is not None, f"{type(err).__name__} names no source line: {err}"
    assert os.path.samefile(loc.filename, path), f"blamed {loc.filename}, expected {path}"
    assert loc.lineno == line, f"blamed line {loc.lineno}, expected {line} ({marker!r})"
    assert f"{os.path.basename(path)}:{line}" in str(err), str(err)
