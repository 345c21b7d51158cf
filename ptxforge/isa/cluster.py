"""Thread-block clusters (sm_90): the kernel directives, barrier.cluster, mapa, and the checks of
distributed shared memory.

Facts (ptxas 13.0, tests/test_isa_cluster.py):

* `.reqnctapercluster X, Y, Z` (the exact cluster shape), `.explicitcluster` (the kernel must be
  launched with a cluster), `.maxclusterrank n` (an upper bound on CTAs per cluster): sm_90,
  PTX 7.8.  A portable cluster has at most 8 CTAs (16 with the non-portable attribute).
* `barrier.cluster.arrive{.release|.relaxed}{.aligned}` / `barrier.cluster.wait{.acquire}{.aligned}`:
  sm_90, PTX 7.8 (with .release, .relaxed or .acquire: 8.0).  Every thread of every CTA of the cluster arrives, then waits.
* `mapa{.shared::cluster}.u32|.u64 d, a, rank`: the address of the same variable in CTA `rank` of
  the cluster (sm_90, PTX 7.8).  Accesses through it use `.shared::cluster` (ld, st, and the
  remote `mbarrier.arrive.release.cluster.shared::cluster.b64 _, [a]`, whose state must be `_`).
* Special registers `%clusterid`, `%nclusterid`, `%cluster_ctaid`, `%cluster_nctaid` (.x/.y/.z),
  `%cluster_ctarank`, `%cluster_nctarank`, `%is_explicit_cluster`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from . import types as T
from .instruction import check_dst, check_value, int_arg, int_or_val, make
from .operands import Imm, Reg
from .targets import Requirement, V

_PTXFORGE_INTERNAL = True

REQ_CLUSTER = Requirement(90, V("7.8"))
#: CTAs a cluster may have without the non-portable cluster-size attribute.
PORTABLE_CLUSTER_CTAS = 8
#: CTAs a cluster may have at most on sm_90 (with the non-portable attribute).
MAX_CLUSTER_CTAS = 16


def cluster_dims(v, what=".reqnctapercluster") -> tuple:
    """A cluster shape as (x, y, z), checked: 1 to 3 positive sizes, at most 16 CTAs in all."""
    if not hasattr(v, "__iter__"):  # one size (a Python or numpy number)
        v = (v,)
    v = tuple(int_arg(x, f"{what} size") for x in v)
    if not 1 <= len(v) <= 3 or any(x < 1 for x in v):
        raise ValidationError(f"{what} takes 1 to 3 positive sizes, got {v}")
    v = v + (1,) * (3 - len(v))
    n = v[0] * v[1] * v[2]
    if n > MAX_CLUSTER_CTAS:
        raise ValidationError(f"{what} {v} has {n} CTAs; an sm_90 cluster has at most {MAX_CLUSTER_CTAS} "
                              f"({PORTABLE_CLUSTER_CTAS} portable)")
    return v


@dataclass(frozen=True)
class ClusterBarrierInfo:
    """One barrier.cluster instruction: 'arrive' or 'wait', its ordering and alignment."""

    kind: str
    sem: str | None = None  # "release"/"relaxed" (arrive), "acquire" (wait)
    aligned: bool = False


def barrier_cluster(kind: str, sem: str | None = None, aligned: bool = False):
    """`barrier.cluster.arrive{.release|.relaxed}{.aligned}` or `barrier.cluster.wait{.acquire}{.aligned}`."""
    legal = {"arrive": (None, "release", "relaxed"), "wait": (None, "acquire")}
    if kind not in legal:
        raise ValidationError(f"barrier.cluster is 'arrive' or 'wait', got {kind!r}")
    if sem not in legal[kind]:
        raise ValidationError(f"barrier.cluster.{kind} takes {', '.join(repr(x) for x in legal[kind])} "
                              f"as its ordering, got {sem!r}")
    req = REQ_CLUSTER.merge(Requirement(90, V("8.0"))) if sem is not None else REQ_CLUSTER
    return make("barrier.cluster", ("barrier", "cluster", kind, sem, "aligned" if aligned else None), req=req,
                info=ClusterBarrierInfo(kind, sem, aligned), mods=(kind,))


def mapa(d, a, rank, space="shared::cluster"):
    """`mapa.shared::cluster.u32 d, a, rank` (shared addresses) or `mapa.u64 d, a, rank` (generic)."""
    if space == "shared::cluster":
        t = T.u32
    elif space == "generic":
        t = T.u64
    else:
        raise ValidationError(f"mapa maps .shared::cluster (u32) or generic (u64) addresses, not {space!r}")
    check_dst(d, t, "mapa destination")
    check_value(a, t, "mapa source address", imm_ok=False)
    if (n := int_arg(rank, "mapa target CTA rank", ".u32")) is not None:
        if not 0 <= n < MAX_CLUSTER_CTAS:
            raise ValidationError(f"mapa target CTA rank {n} is outside 0..{MAX_CLUSTER_CTAS - 1}")
        rank = Imm(n)
    else:
        check_value(rank, T.u32, "mapa target CTA rank")
    return make("mapa", ("mapa", space if space != "generic" else None, t.name), (d, a, rank), n_dst=1,
                req=REQ_CLUSTER, info=space, type=t)


def getctarank(d, a, space="shared::cluster"):
    """`getctarank.shared::cluster.{u32,u64} d, a` (a shared::cluster address) or `getctarank.u64 d, a`
    (generic): d (.u32) = the rank in the cluster of the CTA whose shared memory holds a; the inverse
    of `mapa`."""
    if space not in ("shared::cluster", "generic"):
        raise ValidationError(f"getctarank reads .shared::cluster or generic addresses, not {space!r}")
    check_dst(d, T.u32, "getctarank destination")
    bits = getattr(getattr(a, "type", None), "bits", None)
    if bits not in (32, 64) or not isinstance(a, Reg):
        raise ValidationError(f"getctarank address must be a 32- or 64-bit register, got {a}")
    if space == "generic" and bits != 64:
        raise ValidationError(f"getctarank of a generic address takes a 64-bit register; {a} is {bits}-bit "
                              "(a 32-bit one works for .shared::cluster)")
    t = T.u64 if bits == 64 else T.u32
    check_value(a, t, "getctarank address", imm_ok=False)
    return make("getctarank", ("getctarank", space if space != "generic" else None, t.name), (d, a), n_dst=1,
                req=REQ_CLUSTER, info=space, type=t)


class ClusterOps:
    """Builder methods for clusters (mixed into KernelBuilder)."""

    def getctarank(self, addr, *, space="shared::cluster", dst=None, pred=None):
        """`getctarank{.shared::cluster}.{u32,u64} d, addr`: the cluster rank (u32) of the CTA whose
        shared memory holds `addr` (a shared::cluster address, 32- or 64-bit, or with space="generic"
        a 64-bit generic one)."""
        d = self._dst(dst, T.u32)
        self.emit(getctarank(d, self._val(addr), space), pred)
        return d

    def barrier_cluster_arrive(self, *, sem=None, aligned=False, pred=None):
        """`barrier.cluster.arrive{.release|.relaxed}{.aligned}`: this thread reached the cluster barrier."""
        self.emit(barrier_cluster("arrive", sem, aligned), pred)

    def barrier_cluster_wait(self, *, sem=None, aligned=False, pred=None):
        """`barrier.cluster.wait{.acquire}{.aligned}`: wait until every thread of the cluster arrived."""
        self.emit(barrier_cluster("wait", sem, aligned), pred)

    def cluster_sync(self, *, aligned=True):
        """arrive (release) + wait (acquire): a barrier across all threads of all CTAs of the cluster."""
        self.barrier_cluster_arrive(sem="release", aligned=aligned)
        self.barrier_cluster_wait(sem="acquire", aligned=aligned)

    def mapa(self, addr, rank, *, space="shared::cluster", dst=None, pred=None):
        """The address of shared variable `addr` in CTA `rank` of this cluster (`mapa`); use it with
        space='shared::cluster' loads, stores and mbarrier arrives."""
        t = T.u32 if space == "shared::cluster" else T.u64
        d = self._dst(dst, t)
        self.emit(mapa(d, self._val(addr, t), int_or_val(self._val, rank, "mapa target CTA rank", t=T.u32), space),
                  pred)
        return d

    def cluster_ctarank(self):
        """%cluster_ctarank: this CTA's rank in its cluster (u32)."""
        return self.sreg("cluster_ctarank")
