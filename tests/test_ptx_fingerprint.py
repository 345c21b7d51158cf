"""scripts/ptx_fingerprint.py: the fingerprint of the Hopper schedules' PTX moves with any kernel's text and
only with it."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script():
    path = os.path.join(ROOT, "scripts", "ptx_fingerprint.py")
    spec = importlib.util.spec_from_file_location("ptx_fingerprint", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(mod, capsys, *argv):
    mod.main(list(argv))
    return capsys.readouterr().out.splitlines()


def test_the_fingerprint_is_stable_and_moves_with_a_kernel(capsys, monkeypatch):
    mod = _script()
    count, digest = _run(mod, capsys)[-1].split()
    assert int(count) == len(mod.configurations()) >= 40 and len(digest) == 64
    each = _run(mod, capsys, "--each")
    assert each[-1] == f"{count} {digest}" and len(each) == 2 * int(count) + 1
    assert all(line.split()[1].startswith("hgemm_") for line in each[:-1])
    # one configuration fewer (a kernel gone from the tables): another fingerprint
    cfgs = mod.configurations()
    monkeypatch.setattr(mod, "configurations", lambda: cfgs[:-1])
    assert _run(mod, capsys)[-1].split()[1] != digest
