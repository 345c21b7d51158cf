"""The PTX-in commands of `ptxforge`: lint, listing, to-python, interp (quick checks)."""

from __future__ import annotations

import sys

_PTXFORGE_INTERNAL = True


def _read(path):
    """(name, text) of the PTX input `path` (`-`: standard input, named <stdin>); a missing, empty or binary
    file is a one-line error, not a traceback."""
    from . import input_name, read_ptx_file
    return input_name(path), read_ptx_file(path)


def cmd_lint(args) -> int:
    """`ptxforge lint FILE [--arch sm_XX]`: print the findings; 1 when there are errors."""
    from ..parse.lint import has_errors, lint
    name, text = _read(args.file)
    findings = lint(text, filename=name, arch=args.arch)
    for f in findings:
        print(f)
    errors = sum(f.severity == "error" for f in findings)
    warnings_ = sum(f.severity == "warning" for f in findings)
    print(f"{name}: {errors} error(s), {warnings_} warning(s)", file=sys.stderr)
    return 1 if has_errors(findings) else 0


def cmd_listing(args) -> int:
    """`ptxforge listing FILE`: the annotated listing, the assembler's resources, SASS counts."""
    import warnings
    from ..parse import parse
    name, text = _read(args.file)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = parse(text, filename=name, strict=not args.lenient)
    print(module.listing(), end="")
    if args.no_assemble:
        return 0
    from ..assembler import assemble, available_backends
    from ..errors import PtxforgeError
    if not available_backends():
        print("// (no assembler here: resources and SASS counts left out)")
        return 0
    try:
        r = assemble(module)
    except PtxforgeError as e:
        print(f"// assembler: {e}")
        return 1
    print("//")
    for line in r.report().splitlines():
        print(f"// {line}")
    try:
        for k in module.kernels:
            counts = r.sass_opcodes(k.name)
            if counts:
                print(f"// SASS {k.name}: " + ", ".join(f"{op} {n}" for op, n in sorted(counts.items())))
    except PtxforgeError:
        pass
    return 0


def cmd_to_python(args) -> int:
    """`ptxforge to-python FILE [-o OUT]`: the KernelBuilder script that rebuilds the file."""
    from ..parse import parse
    from ..parse.to_python import to_python
    from ..errors import CliError
    name, ptx = _read(args.file)
    module = parse(ptx, filename=name, strict=not args.lenient)
    text = to_python(module, source=name)
    if args.output and args.output != "-":
        try:
            with open(args.output, "w") as f:
                f.write(text)
        except OSError as e:
            raise CliError(f"-o {args.output}: cannot write it ({e.strerror or e})") from None
    else:
        print(text, end="")
    return 0


#: What `--arg` accepts, for the errors that refuse anything else.
ARG_FORMS = ("TYPE:COUNT[:zeros|arange|rand] (an array, e.g. f32:1024:rand) or TYPE=VALUE (a scalar, e.g. u32=7, "
             "f32=0.5)")
ARRAY_FILLS = ("zeros", "arange", "rand")


def _arg_error(spec: str, what: str):
    """The CliError for `--arg spec`: what is wrong with it and the forms --arg accepts."""
    from ..errors import CliError
    return CliError(f"--arg {spec!r}: {what}; --arg takes {ARG_FORMS}")


def _arg_dtype(spec: str, name: str):
    """The numpy dtype of the PTX type `name` of `--arg spec`; CliError for a type with none."""
    from ..errors import ValidationError
    from ..isa import types as T
    try:
        return T.numpy_dtype(T.lookup(name))
    except ValidationError as e:
        raise _arg_error(spec, e.message) from None
    except ValueError as e:  # a PTX type no numpy array holds (.pred, .b128 ...)
        raise _arg_error(spec, str(e)) from None


def _scalar_arg(spec: str, name: str, text: str):
    """The numpy scalar of `--arg TYPE=VALUE`: a float for float types (bf16 as its bit pattern), an integer
    (decimal, 0x, 0o, 0b) within the type's range for the others."""
    import numpy as np
    dt = _arg_dtype(spec, name)
    if name == "bf16":  # a number, held as its bf16 bit pattern
        from ..bfloat16 import to_bf16
        try:
            value = np.float32(float(text))
        except ValueError:
            raise _arg_error(spec, f"{name} takes a number, got {text!r}") from None
        return np.uint16(to_bf16(value))
    if dt.kind == "f":
        try:
            value = float(text)
        except ValueError:
            raise _arg_error(spec, f"{name} takes a number, got {text!r}") from None
        with np.errstate(over="ignore"):
            out = dt.type(value)
        if np.isfinite(value) and not np.isfinite(out):
            raise _arg_error(spec, f"{text} is outside the range of {name} (largest {np.finfo(dt).max})")
        return out
    try:
        value = int(text, 0)
    except ValueError:
        raise _arg_error(spec, f"{name} takes an integer (like 7, -7 or 0x1f), got {text!r}") from None
    info = np.iinfo(dt)
    if not info.min <= value <= info.max:
        raise _arg_error(spec, f"{value} is outside the range of {name} ({info.min}..{info.max})")
    return dt.type(value)


#: The 4-bit types: an array of them is COUNT values packed two to a byte (ptxforge.int4.pack_int4).
FOUR_BIT = {"s4": True, "u4": False}  # name -> signed


def _array_arg(spec: str, parts: list):
    """The numpy array of `--arg TYPE:COUNT[:FILL]`: COUNT values of the type (s4/u4 packed two to a byte,
    bf16 as bit patterns), filled with zeros, 0, 1, 2 ... (wrapped into a 4-bit type's range) or random
    values from 0 to 99 (random 4-bit values for s4/u4)."""
    import numpy as np
    from ..bfloat16 import to_bf16
    from ..int4 import pack_int4, random_int4
    if len(parts) > 3:
        raise _arg_error(spec, f"an array takes at most three ':'-separated fields, got {len(parts)}")
    name = parts[0]
    dt = _arg_dtype(spec, name)
    try:
        n = int(parts[1])
    except ValueError:
        n = None
    if n is None or n < 1:
        raise _arg_error(spec, f"the element count must be an integer of at least 1, got {parts[1]!r}")
    nbytes = n // 2 if name in FOUR_BIT else n * dt.itemsize
    if nbytes > MAX_ARRAY_BYTES:
        raise _arg_error(spec, f"{n} elements of {name} ({nbytes} bytes) are too large for the interpreter, "
                               f"which takes arrays of at most {MAX_ARRAY_BYTES} bytes")
    fill = parts[2] if len(parts) > 2 else "zeros"
    if fill not in ARRAY_FILLS:
        raise _arg_error(spec, f"unknown fill {fill!r}; an array is filled with one of {'|'.join(ARRAY_FILLS)}")
    rng = np.random.default_rng(0)
    if name in FOUR_BIT:
        signed = FOUR_BIT[name]
        if n % 2:
            raise _arg_error(spec, f"{name} values travel two to a byte, so an array of them takes an even count, "
                                   f"got {n}")
        low = -8 if signed else 0
        values = (random_int4((n,), rng, signed=signed) if fill == "rand"
                  else low + (np.arange(n) - low) % 16 if fill == "arange" else np.zeros(n, np.int8))
        return pack_int4(values, signed=signed)
    values = (rng.integers(0, 100, n) if fill == "rand" else np.arange(n) if fill == "arange"
              else np.zeros(n, np.int64))
    if name == "bf16":
        return to_bf16(values.astype(np.float32))
    return values.astype(dt)


def _arg(spec: str):
    """The interpreter argument of one `--arg`: `f32:1024` (zeros), `f32:1024:arange`, `f32:1024:rand` (arrays)
    or `u32=7`, `f32=0.5` (scalars); CliError naming the argument and the accepted forms for anything else."""
    if "=" in spec:
        name, text = spec.split("=", 1)
        return _scalar_arg(spec, name, text.strip())
    parts = spec.split(":")
    if len(parts) < 2:
        raise _arg_error(spec, "neither an array (TYPE:COUNT) nor a scalar (TYPE=VALUE)")
    return _array_arg(spec, parts)


#: The largest array one `--arg` makes: the interpreter is for quick checks, and it copies every array it is given.
MAX_ARRAY_BYTES = 1 << 30

#: About the most threads of a kernel the interpreter runs in a second (a short kernel; longer ones run fewer).
THREADS_PER_SECOND = 10 ** 6

#: The most threads `interp` runs without --max-threads: some seconds for a short kernel, minutes for a long one.
DEFAULT_MAX_THREADS = 1 << 24

#: The sizes a launch may have: (largest x, largest y and z) of --grid and --block, and the threads of one CTA.
GRID_LIMITS = (2 ** 31 - 1, 65535)
BLOCK_LIMITS = (1024, 64)
CTA_THREADS = 1024


def _launch_shape(option: str, sizes: list) -> tuple:
    """--grid or --block as a tuple, after refusing what no launch can have (CliError naming the option)."""
    from ..errors import CliError
    x_max, yz_max = GRID_LIMITS if option == "--grid" else BLOCK_LIMITS
    shown = " ".join(map(str, sizes))
    if not 1 <= len(sizes) <= 3:
        raise CliError(f"{option} {shown}: takes 1 to 3 sizes (x [y [z]]), got {len(sizes)}")
    for axis, v, top in zip("xyz", sizes, (x_max, yz_max, yz_max)):
        if not 1 <= v <= top:
            raise CliError(f"{option} {shown}: {axis} must be in 1..{top}, got {v}")
    if option == "--block":
        threads = 1
        for v in sizes:
            threads *= v
        if threads > CTA_THREADS:
            raise CliError(f"--block {shown}: {threads} threads; a CTA has at most {CTA_THREADS}")
    return tuple(sizes)


def _check_thread_count(grid: tuple, block: tuple, most: int) -> None:
    """Refuse (CliError) a launch of more than `most` threads: the CPU interpreter would take hours over it."""
    from ..errors import CliError
    threads = 1
    for v in grid + block:
        threads *= v
    if threads > most:
        seconds = threads // THREADS_PER_SECOND
        took = (f"{seconds} seconds" if seconds < 120 else f"{seconds // 60} minutes" if seconds < 7200
                else f"{seconds // 3600} hours")
        raise CliError(f"--grid {' '.join(map(str, grid))} --block {' '.join(map(str, block))}: {threads} threads, "
                       f"more than the {most} the interpreter runs without --max-threads (at about "
                       f"{THREADS_PER_SECOND} threads a second at best, {took} or more); shrink --grid to the CTAs "
                       "a check needs (or --block), or raise --max-threads to run it all the same")


def _kernel(module, name: str, asked):
    """The kernel (.entry) `asked` of `module`, or its only one; CliError naming the kernels and --kernel."""
    from ..errors import CliError
    entries = module.entries
    names = ", ".join(k.name for k in entries)
    if asked is None:
        if len(entries) == 1:
            return entries[0]
        if not entries:
            raise CliError(f"{name}: no kernel (.entry) to run")
        raise CliError(f"{name} has {len(entries)} kernels ({names}); name one with --kernel")
    for k in entries:
        if k.name == asked:
            return k
    if any(f.name == asked for f in module.functions):
        raise CliError(f"--kernel {asked}: {asked} is a device function (.func) of {name}; interp runs a kernel "
                       f"(.entry): {names or 'the file has none'}")
    raise CliError(f"--kernel {asked}: no kernel {asked!r} in {name}; its kernels: {names or 'none'}")


def cmd_interp(args) -> int:
    """`ptxforge interp FILE --kernel K --grid .. --block .. --arg ..`: one run on the CPU interpreter."""
    import numpy as np
    from .. import interp
    from ..errors import CliError
    from ..parse import parse
    grid = _launch_shape("--grid", args.grid)
    block = _launch_shape("--block", args.block)
    _check_thread_count(grid, block, args.max_threads)
    values = [_arg(a) for a in args.arg]
    name, text = _read(args.file)
    module = parse(text, filename=name, strict=not args.lenient)
    kernel = _kernel(module, name, args.kernel)
    limit = kernel.target.limits.shared_per_cta
    if not 0 <= args.shared <= limit:
        raise CliError(f"--shared {args.shared}: dynamic shared memory is 0 to {limit} bytes; a CTA of "
                       f"{kernel.target.name} has at most {limit} in all")
    try:
        report = interp.run(module, kernel, grid=grid, block=block, args=values, shared=args.shared, check=False)
    except MemoryError:
        raise CliError(f"out of memory running {kernel.name} on the interpreter at grid {grid}, block "
                       f"{block}") from None
    print(report)
    params = kernel.params
    for i, (spec, v) in enumerate(zip(args.arg, values)):
        if i < len(params) and params[i].nbytes is not None:
            continue  # the bytes of a structure passed by value (.param .b8 p[N]): the kernel cannot change them
        if hasattr(v, "shape") and v.shape:
            label = params[i].name if i < len(params) else f"argument {i + 1}"
            shown = np.array2string(v[:16], max_line_width=1 << 16)
            print(f"{label} ({spec}) after the run: {shown}{' ...' if v.size > 16 else ''}")
    return 0 if report.ok else 1


def add_parsers(sub) -> None:
    """Register lint, listing, to-python and interp on the `ptxforge` command."""
    from . import FILE_HELP, positive_int
    p = sub.add_parser("lint", help="check a PTX file against the ISA tables: findings as FILE:LINE")
    p.add_argument("file", help=FILE_HELP)
    p.add_argument("--arch", default=None, help="also check against this target (sm_80, sm_90, sm_90a ...)")
    p.set_defaults(func=cmd_lint)
    p = sub.add_parser("listing", help="annotated listing of a PTX file (lines, resources, SASS counts)")
    p.add_argument("file", help=FILE_HELP)
    p.add_argument("--lenient", action="store_true", help="keep lines the tables reject as opaque instructions")
    p.add_argument("--no-assemble", action="store_true", help="leave out the assembler's resources and SASS")
    p.set_defaults(func=cmd_listing)
    p = sub.add_parser("to-python", help="write a KernelBuilder script that rebuilds a PTX file")
    p.add_argument("file", help=FILE_HELP)
    p.add_argument("-o", "--output", default=None, help="write the script here (default, or '-': standard "
                                                         "output)")
    p.add_argument("--lenient", action="store_true", help="keep lines the tables reject as opaque instructions")
    p.set_defaults(func=cmd_to_python)
    p = sub.add_parser("interp", help="run one kernel of a PTX file on the CPU interpreter (quick check)")
    p.add_argument("file", help=FILE_HELP)
    p.add_argument("--kernel", default=None, help="the kernel (.entry) to run (default: the file's only one)")
    p.add_argument("--grid", type=int, nargs="+", default=[1], help="CTAs: x [y [z]] (default 1)")
    p.add_argument("--block", type=int, nargs="+", default=[32], help="threads of a CTA: x [y [z]] (default 32)")
    p.add_argument("--shared", type=int, default=0, help="dynamic shared memory bytes (default 0)")
    p.add_argument("--max-threads", type=positive_int, default=DEFAULT_MAX_THREADS,
                   help=f"refuse a launch of more threads (grid times block) than this, which would take the "
                        f"interpreter hours (default {DEFAULT_MAX_THREADS})")
    p.add_argument("--arg", action="append", default=[],
                   help="an argument, in the kernel's parameter order (repeat it): " + ARG_FORMS + "; rand draws 0 to "
                        "99; an s4/u4 array is COUNT 4-bit values (any for rand) packed two to a byte, a bf16 one bit "
                        "patterns")
    p.add_argument("--lenient", action="store_true", help="keep lines the tables reject as opaque instructions")
    p.set_defaults(func=cmd_interp)
