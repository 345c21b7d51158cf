"""Hopper (sm_90/sm_90a) building blocks between the builder and the schedules.

* `SmemTile`: one shared-memory tile layout that yields the TMA box/swizzle and the wgmma descriptors.
* `MbarrierRing`, `RingState`: an N-stage full/empty mbarrier ring with phase tracking.
* `WarpSpecialized`: producer/consumer warpgroups with setmaxnreg, and `register_split` to check a plan
  (against `entry_register_cap`, the registers a CTA starts with: a fact of the ISA layer, re-exported here).
"""

from ..isa.tensor import entry_register_cap
from .layout import SmemTile
from .pipeline import MbarrierRing, RingState, WarpSpecialized, register_split

__all__ = ["SmemTile", "MbarrierRing", "RingState", "WarpSpecialized", "entry_register_cap", "register_split"]
