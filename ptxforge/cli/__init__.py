"""The `ptxforge` command."""

from __future__ import annotations

import argparse
import os
import re
import sys

from ..errors import CliError, PtxforgeError


#: The help of every command's FILE argument.
FILE_HELP = "a PTX file, or - for standard input"

#: The name `-` (standard input) has in messages, listings and lint lines.
STDIN_NAME = "<stdin>"


def input_name(path: str) -> str:
    """The name a PTX input goes by in messages: `path`, or STDIN_NAME for `-`."""
    return STDIN_NAME if path == "-" else path


def int_in(low: int, high: int | None = None):
    """An argparse `type=`: an integer from `low` to `high` (no upper bound when None).  A value outside is the
    usage error argparse prints, naming the option: `argument --n: must be at least 1, got 0`."""
    def parse(text: str) -> int:
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"takes an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}, got {value}")
        return value
    parse.__name__ = "integer"  # what argparse calls the type when it cannot convert
    parse.__doc__ = (f"An argparse `type=`: the integer of a command-line value, from {low}"
                     + (f" to {high}" if high is not None else " up") + "; ArgumentTypeError for anything else.")
    return parse


#: An argparse `type=` for a size or count: an integer of at least 1.
positive_int = int_in(1)


def read_ptx_file(path: str) -> str:
    """The text of a PTX file, or of standard input for `-`; CliError (one line) for a missing file, a directory,
    an empty, binary (NUL bytes) or non-UTF-8 file."""
    name = input_name(path)
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        if not os.path.lexists(path):
            raise CliError(f"{path}: no such file")
        if os.path.isdir(path):
            raise CliError(f"{path}: is a directory, not a PTX file")
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise CliError(f"{path}: cannot read it ({e.strerror or e})") from None
    if not data.strip():
        raise CliError(f"{name}: the file is empty")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise CliError(f"{name}: a binary file (NUL byte at offset {nul}), not PTX text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CliError(f"{name}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); PTX is ASCII "
                       "text") from None


def _cmd_assemble(args) -> int:
    from ..assembler import assemble
    ptx = read_ptx_file(args.file)
    if args.arch is None and not re.search(r"^\s*\.target\s", ptx, re.M):
        raise CliError(f"{input_name(args.file)}: no .target directive; PTX names its target after .version "
                       "(.target sm_90), and ptxas and nvJitLink refuse a file without one")
    r = assemble(ptx, args.arch, backend=args.backend)
    print(r.report())
    if args.sass:
        for op, n in sorted(r.sass_opcodes().items()):
            print(f"  {n:5d}  {op}")
    return 0


def _cmd_targets(args) -> int:
    from ..assembler import available_backends, backend_ptx_cap
    from ..isa.targets import SUPPORTED_TARGETS, Target
    for name in SUPPORTED_TARGETS:
        t = Target.parse(name)
        s4 = "native" if t.mma_s4_native else "emulated by ptxas (slow)"
        print(f"{name:8s} least PTX ISA {t.min_ptx}   mma.sync s4/u4: {s4}")
    for be in available_backends():
        print(f"assembler {be}: accepts PTX ISA up to {backend_ptx_cap(be)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the `ptxforge` command and its subcommands."""
    p = argparse.ArgumentParser(prog="ptxforge", description="Write, check, assemble and run PTX from Python.")
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("assemble", help="assemble a PTX file offline and report resources (or mapped errors)")
    a.add_argument("file", help=FILE_HELP)
    a.add_argument("--arch", default=None, help="sm_80, sm_90, sm_90a ... (default: the file's .target)")
    a.add_argument("--backend", default="auto", choices=("auto", "nvjitlink", "ptxas"))
    a.add_argument("--sass", action="store_true", help="also list SASS opcode counts")
    a.set_defaults(func=_cmd_assemble)
    t = sub.add_parser("targets", help="list supported targets and assemblers")
    t.set_defaults(func=_cmd_targets)
    from .gemm import add_parser as add_gemm_int4
    add_gemm_int4(sub)
    from .ptx_in import add_parsers as add_ptx_in  # lint, listing, to-python, interp
    add_ptx_in(sub)
    return p


#: The directory of the ptxforge package: an error located in one of its Python files is the command's own
#: business, not the user's, so the command leaves that location out.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def error_text(e: PtxforgeError) -> str:
    """What the command prints for `e`: its message, with the location it carries only when that adds something
    (a PTX line the message does not already name; never a Python line inside ptxforge)."""
    loc = e.loc
    if loc is None:
        return e.message
    if os.path.abspath(loc.filename).startswith(_PACKAGE_DIR + os.sep):
        return e.message
    if f"{os.path.basename(loc.filename)}:{loc.lineno}" in e.message:
        return e.message
    return str(e)


def _stdout_gone() -> None:
    """Point standard output at /dev/null once its reader has gone (`| head`), so the interpreter's last flush
    raises nothing."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file descriptor (a test's capture)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def run_main(entry, *args) -> int:
    """The exit status of `entry(*args)`, a command's (or an example script's) main function; when the reader of
    standard output goes away (`... --listing | head -1`) the rest of the output is dropped and the status is 1,
    with no BrokenPipeError traceback.  Scripts end with `sys.exit(run_main(main))`."""
    try:
        status = entry(*args)
        sys.stdout.flush()  # the last buffered lines meet a closed pipe here, not in the interpreter's exit
        return status
    except BrokenPipeError:
        _stdout_gone()
        return 1


def main(argv=None) -> int:
    """Run the `ptxforge` command with `argv` (default: sys.argv); returns the exit status."""
    args = build_parser().parse_args(argv)
    return run_main(_run_command, args)  # a reader that goes away: `ptxforge listing k.ptx | head`


def _run_command(args) -> int:
    """Run the parsed command: a PtxforgeError is one `ptxforge: error:` line and status 1, Ctrl-C status 130."""
    try:
        return args.func(args)
    except PtxforgeError as e:
        print(f"ptxforge: error: {error_text(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C, say in a long `interp` run: the shell's status for SIGINT, no traceback
        print("ptxforge: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
