"""PTX written by Triton: parsed (leniently: forms the tables lack stay opaque and are counted),
round-tripped, interpreted on the CPU against numpy (stored files, tests/data/triton), and on a GPU
with Triton generated afresh, launched from the parsed module and compared with Triton's own run."""

import glob
import importlib.util
import json
import os

import numpy as np
import pytest

import ptxforge
from ptxforge import interp
from ptxforge.assembler import assemble, available_backends, disassembler
from ptxforge.parse import parse, read
from ptxforge.parse.equality import same_module

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STORED = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "triton", "*.ptx")))


def _script():
    spec = importlib.util.spec_from_file_location("triton_ptx", os.path.join(ROOT, "scripts", "triton_ptx.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _round_trip(text, path):
    reading = read(text, filename=path, strict=False)
    module = reading.module
    again = parse(module.ptx, filename="again.ptx", strict=False)
    assert again.ptx == module.ptx and same_module(again, module)
    return reading


def _interp_args(module, kernel, args):
    """Triton may append hidden pointer parameters (scratch space): pass null for them."""
    extra = len(module.kernel(kernel).params) - len(args)
    return list(args) + [0] * extra


def _compare(ref, args, got, rtol):
    for i, want in ref(*args).items():
        np.testing.assert_allclose(got[i], want, rtol=rtol, atol=rtol)


@pytest.mark.skipif(not STORED, reason="no Triton PTX in tests/data/triton (scripts/triton_ptx.py writes it on a "
                                       "machine with a GPU and Triton)")
@pytest.mark.parametrize("path", STORED, ids=[os.path.basename(p) for p in STORED])
def test_stored_triton_ptx(path):
    text = open(path).read()
    meta = json.load(open(path[:-4] + ".json"))
    reading = _round_trip(text, path)
    module = reading.module
    if "ptxas" in available_backends() and disassembler() is not None:
        assert assemble(text, backend="ptxas").sass_opcodes() == assemble(module.ptx, backend="ptxas").sass_opcodes()
    s = _script()
    args = s.make_args(meta["args"])
    if reading.opaque:
        pytest.skip(f"{len(reading.opaque)} opaque line(s), e.g. {reading.opaque[0][1]!r}: not interpreted")
    try:
        interp.run(module, meta["kernel"], grid=tuple(meta["grid"]), block=meta["block"],
                   args=_interp_args(module, meta["kernel"], args), shared=meta["shared"])
    except interp.InterpUnsupported as e:
        pytest.skip(f"the interpreter does not model a line of this kernel: {e}")
    _compare(s.REFERENCES[meta["reference"]], s.make_args(meta["args"]), args, 2e-2)


@pytest.mark.skipif(not STORED, reason="no Triton PTX in tests/data/triton")
@pytest.mark.parametrize("path", STORED, ids=[os.path.basename(p) for p in STORED])
def test_stored_triton_ptx_reads_strictly(path):
    """Every line Triton 3.6 wrote for these kernels is a form the tables know (`{ %r1 }` scalar braces and
    `mov.b32 %r, 0f...` bit literals included): nothing falls back to an opaque line."""
    parse(open(path).read(), filename=path, strict=True)


@pytest.mark.gpu
def test_triton_kernels_from_their_parsed_ptx():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import torch
    s = _script()
    report = []
    for case in s.triton_cases():
        name = case[0]
        _, ptx, kname, block, shared, args, triton_out = s.run_triton(case)
        reading = _round_trip(ptx, f"{name}.ptx")
        module = reading.module
        report.append(f"{name}: {module.instruction_count()} instructions, {len(reading.opaque)} opaque")
        fn = ptxforge.load(module)[kname]
        targs = s.to_torch(args)
        fn(case[2], block, *_interp_args(module, kname, targs), shared=shared)
        torch.cuda.synchronize()
        ours = [t.cpu().numpy() if hasattr(t, "cpu") else t for t in targs]
        for i, spec in enumerate(case[3]):
            if spec["kind"] == "array":
                np.testing.assert_allclose(ours[i], triton_out[i], rtol=1e-5, atol=1e-5, err_msg=f"{name} arg {i}")
        _compare(s.REFERENCES[case[5]], args, ours, 2e-2)
        if not reading.opaque and name != "matmul":  # the CPU interpreter too, on the same inputs
            host = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
            try:
                interp.run(module, kname, grid=case[2], block=block, args=_interp_args(module, kname, host),
                           shared=shared)
            except interp.InterpUnsupported as e:
                report.append(f"{name}: not interpreted ({e})")
                continue
            for i, spec in enumerate(case[3]):
                if spec["kind"] == "array":
                    np.testing.assert_allclose(host[i], triton_out[i], rtol=1e-4, atol=1e-4)
    print("\n".join(report))


@pytest.mark.parametrize("path", STORED, ids=os.path.basename)
def test_to_python_rebuilds_triton_ptx(path, tmp_path):
    """Triton's PTX (with its .file/.loc debug lines and DWARF sections) becomes a builder script whose
    module has the same instructions, `.loc` lines included; the builder's finish() may add one final
    `ret` after the trailing labels."""
    import subprocess
    import sys
    from ptxforge.parse.to_python import to_python
    module = parse(open(path).read(), filename=os.path.basename(path))
    script = tmp_path / "rebuilt.py"
    script.write_text(to_python(module))  # the script prints its module's PTX when run
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr
    rebuilt = parse(proc.stdout)
    want = [i.render() for i in module.kernels[0].instructions]
    got = [i.render() for i in rebuilt.kernels[0].instructions]
    assert got[:len(want)] == want and got[len(want):] in ([], ["ret;"])
    assert proc.stdout.count(".loc ") == module.ptx.count(".loc ") > 0
