"""Clusters on the H200 (cuLaunchKernelEx with the cluster-dimension attribute) against the interpreter.

    PTXFORGE_REQUIRE_GPU=1 python -m pytest -q tests/test_hopper_cluster_gpu.py
"""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.errors import LaunchError
from ptxforge.runtime import DeviceBuffer, launch_cluster

from support.cluster_probes import (ctarank_probe, exchange_probe, expected_ctarank, expected_exchange, expected_ring,
                                    expected_sregs, multicast_probe, ring_probe, sreg_probe, SREGS)
from support.examples import load_example

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("grid, cluster", [((4, 1), (2, 1)), ((4, 4), (2, 2)), ((8, 2), (4, 1))])
def test_special_registers_match(grid, cluster):
    k = sreg_probe(cluster)
    fn = pf.load(k.module())["cluster_sregs"]
    out = DeviceBuffer.empty((grid[0] * grid[1], len(SREGS)), np.uint32)
    launch_cluster(fn, grid, 32, cluster, out)
    cpu = np.zeros((grid[0] * grid[1], len(SREGS)), np.uint32)
    interp.run(k, grid=grid, block=32, args=[cpu])
    np.testing.assert_array_equal(out.to_host(), cpu)
    np.testing.assert_array_equal(cpu, expected_sregs(grid, cluster))


@pytest.mark.parametrize("size", [2, 4, 8])
def test_distributed_shared_memory_ring(size):
    k = ring_probe(size)
    fn = pf.load(k.module())["cluster_ring"]
    grid = 2 * size
    out = DeviceBuffer.empty((grid, 64), np.uint32)
    launch_cluster(fn, grid, 64, (size, 1, 1), out)
    np.testing.assert_array_equal(out.to_host(), expected_ring(grid, size))


@pytest.mark.parametrize("size", [2, 4])
def test_getctarank_matches_the_interpreter(size):
    """getctarank of mapa addresses (shared::cluster and generic) and of CTA-local ones, on the H200 and on the
    interpreter: the same ranks, and the ranks the spec gives."""
    k = ctarank_probe(size)
    fn = pf.load(k.module())["cluster_ctarank_probe"]
    grid = 2 * size
    out = DeviceBuffer.empty((grid, 32, 4), np.uint32)
    launch_cluster(fn, grid, 32, (size, 1, 1), out)
    cpu = np.zeros((grid, 32, 4), np.uint32)
    interp.run(k, grid=grid, block=32, args=[cpu])
    np.testing.assert_array_equal(out.to_host(), cpu)
    np.testing.assert_array_equal(cpu, expected_ctarank(grid, size))


def test_bulk_multicast_and_the_cta_to_cta_bulk_copy_match_the_interpreter():
    """cp.async.bulk ... .multicast::cluster (128 bytes from global into both CTAs of a pair) and
    cp.async.bulk.shared::cluster.shared::cta (each CTA's 128 bytes into its partner's shared memory), each
    completing on the receiving CTA's mbarrier: the same words on the GPU as on the interpreter."""
    src = np.arange(32, dtype=np.uint32) * 3 + 5
    fn = pf.load(multicast_probe(bulk=True).module())["multicast_probe"]
    out = DeviceBuffer.empty((2, 32), np.uint32)
    launch_cluster(fn, 2, 32, (2, 1, 1), DeviceBuffer.from_host(src), out)
    np.testing.assert_array_equal(out.to_host(), np.stack([src, src]))
    fn = pf.load(exchange_probe().module())["s2s"]
    out = DeviceBuffer.empty((2, 32), np.uint32)
    launch_cluster(fn, 2, 32, (2, 1, 1), out)
    cpu = np.zeros((2, 32), np.uint32)
    interp.run(exchange_probe(), grid=2, block=32, args=[cpu])
    np.testing.assert_array_equal(out.to_host(), cpu)
    np.testing.assert_array_equal(cpu, expected_exchange())


def test_cluster_launch_checks_on_the_device():
    fn = pf.load(ring_probe(2).module())["cluster_ring"]
    out = DeviceBuffer.empty((4, 64), np.uint32)
    with pytest.raises(LaunchError, match="requires clusters of"):
        launch_cluster(fn, 4, 64, (4, 1, 1), out)
    with pytest.raises(LaunchError, match="does not divide"):
        launch_cluster(fn, 3, 64, (2, 1, 1), out)


def test_multicast_example_matches_numpy_and_the_interpreter():
    ex = load_example("hopper_cluster_multicast")
    d, flags, want = ex.run_gpu(64, 128, 64, 256)
    c_d, c_flags, _ = ex.run_cpu(64, 128, 256)
    np.testing.assert_array_equal(d, c_d)
    np.testing.assert_array_equal(flags, c_flags)
    d, flags, want = ex.run_gpu(256, 1024, 512, 1024)
    np.testing.assert_array_equal(d.astype(np.int64), want)
    np.testing.assert_array_equal(flags, ex.expected_flags(len(flags)))
