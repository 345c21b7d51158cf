"""A pytest plugin that keeps the text of every Module any test renders.

    PTXFORGE_RECORD_DIR=/tmp/out python -m pytest -p record_modules tests/test_builder.py ...

writes each distinct rendering to `<dir>/<sha1>.ptx` when the session ends.  tests/test_parse_own.py
runs other test files under it and parses every module they emitted.
"""

import hashlib
import os

import ptxforge.module as _module

_seen: dict = {}


def pytest_configure(config):
    original = _module.Module.render

    def render(self, *args, **kwargs):
        r = original(self, *args, **kwargs)
        _seen.setdefault(hashlib.sha1(r.text.encode()).hexdigest(), r.text)
        return r

    _module.Module.render = render


def pytest_unconfigure(config):
    out = os.environ.get("PTXFORGE_RECORD_DIR")
    if not out:
        return
    os.makedirs(out, exist_ok=True)
    for key, text in _seen.items():
        with open(os.path.join(out, f"{key}.ptx"), "w") as f:
            f.write(text)
