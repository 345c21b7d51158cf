"""A fingerprint of the PTX the Hopper GEMM schedules ship: one SHA-256 over every default, skinny and tuning
configuration (and two clustered ones), each as built and as a plan launches it without a K split, with the
facts a launch takes from it (shared memory, the split-K flag's offset and workspace bytes).

    python scripts/ptx_fingerprint.py            # the count and the fingerprint
    python scripts/ptx_fingerprint.py --each     # a short hash per kernel as well

Two trees whose fingerprints agree launch the same kernels with the same resources: what a change that
should leave the machine code alone (a refactor, a faster emitter) is checked with.  No GPU is needed.
"""

import argparse
import hashlib

from ptxforge.schedules.hopper import HopperGemm
from ptxforge.schedules.hopper.splitk import workspace_bytes
from ptxforge.schedules.hopper.defaults import DEFAULTS, SKINNY
from ptxforge.schedules.hopper.tuning import CANDIDATES


def configurations() -> list:
    """Every configuration the schedules pick or the tuning tables try, in a fixed order."""
    cfgs = [HopperGemm(op, **kw) for op, kw in DEFAULTS.items()]
    cfgs += [HopperGemm(op, **kw) for op, table in SKINNY.items() for _, kw in table]
    cfgs += [HopperGemm(op, **kw) for op, tried in CANDIDATES.items() for kw in tried]
    return cfgs + [HopperGemm("s8", cluster_m=2), HopperGemm("s8", cluster_n=2)]


def main(argv=None) -> None:
    """Print the number of configurations and the fingerprint (with --each, a hash per kernel first)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--each", action="store_true", help="also print a short hash per kernel")
    args = ap.parse_args(argv)
    whole = hashlib.sha256()
    cfgs = configurations()
    for cfg in cfgs:
        for kernel in (cfg, cfg.for_launch(100, 1)):
            facts = str((kernel.smem_bytes, kernel.fixup_flag_offset, workspace_bytes(kernel, 300, 700, 3),
                         kernel.module.ptx)).encode()
            whole.update(facts)
            if args.each:
                print(f"{hashlib.sha256(facts).hexdigest()[:12]}  {kernel.kernel_name}")
    print(len(cfgs), whole.hexdigest())


if __name__ == "__main__":
    main()
