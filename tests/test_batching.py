"""The one batching policy (`clashx.core.block_size`): CPU blocks, one vmap on an accelerator within its
memory, overrides, and the footprint estimate against what XLA actually allocates."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from clashx.core import _batching as B
from clashx.core import block_override, block_size, in_blocks, model_world_bytes
from clashx.scenes import make_strike_scene, sample_strikes, simulate_strike, strike_world_bytes


class FakeAccelerator:
    """A device as `jax.Device` reports itself: platform and memory statistics."""

    def __init__(self, memory: int | None):
        self.platform = "gpu"
        self._memory = memory

    def memory_stats(self):
        return None if self._memory is None else {"bytes_limit": self._memory}


def test_cpu_keeps_blocks_of_256():
    cpu = jax.devices("cpu")[0]
    assert block_size(10_000, world=10_000, device=cpu) == B.CPU_BLOCK == 256
    assert block_size(100, world=10_000, device=cpu) == 100  # a small batch is one block


def test_accelerator_runs_the_whole_batch_in_one_vmap_within_its_memory():
    gpu = FakeAccelerator(memory=10**9)  # half of it, 5e8 bytes, for the batch
    assert block_size(4_000, world=100_000, device=gpu) == 4_000  # 4e8 bytes: one vmap
    assert block_size(65_536, world=100_000, device=gpu) == 5_000  # capped by memory
    assert block_size(10, world=10**12, device=gpu) == 1  # never zero
    no_stats = FakeAccelerator(memory=None)
    assert block_size(10**8, world=1_000, device=no_stats) == int(B.MEMORY_SHARE * B.DEFAULT_MEMORY) // 1_000


def test_the_callers_choice_and_the_override_win():
    gpu = FakeAccelerator(memory=10**12)
    assert block_size(5_000, world=10, block=64, device=gpu) == 64
    with block_override(512):
        assert block_size(5_000, world=10, device=gpu) == 512
        assert block_size(100, world=10, device=gpu) == 100
        assert block_size(5_000, world=10, block=32, device=gpu) == 32  # the argument before the override
    assert block_size(5_000, world=10, device=gpu) == 5_000
    with pytest.raises(ValueError, match="--block-size 0"):
        with block_override(0):
            pass
    with pytest.raises(ValueError, match="positive"):
        block_size(10, world=10, block=0)


def test_in_blocks_is_the_whole_call_with_a_padded_last_block():
    x = np.arange(14.0).reshape(7, 2)
    calls = []

    def fn(a):
        calls.append(a.shape)
        return {"sum": a.sum(1), "twice": 2 * a}

    out = in_blocks(fn, x, world=1, block=3)
    assert calls == [(3, 2)] * 3  # one compiled shape
    np.testing.assert_array_equal(out["sum"], x.sum(1))
    np.testing.assert_array_equal(out["twice"], 2 * x)


def test_footprint_estimate_covers_what_xla_allocates_per_world():
    # the policy's estimate of one strike world must not be below the temporaries XLA allocates
    # per world for the vmapped strike (contact phase and slide); else a GPU batch sized by it could overflow
    sim = make_strike_scene("square")
    n = 8
    strikes = jnp.asarray(sample_strikes(n, key=jax.random.PRNGKey(0)), jnp.float32)
    params = jnp.tile(jnp.asarray(sim.space.vector(), jnp.float32), (n, 1))
    compiled = jax.jit(jax.vmap(lambda s, p: simulate_strike(sim, s, p))).lower(strikes, params).compile()
    memory = compiled.memory_analysis()
    if memory is None:
        pytest.skip("this backend reports no memory analysis")
    per_world = (memory.temp_size_in_bytes + memory.output_size_in_bytes) / n
    assert strike_world_bytes(sim) >= per_world
    assert strike_world_bytes(sim) == max(model_world_bytes(sim.model), model_world_bytes(sim.slide_model))


def test_the_block_size_flag_reaches_every_batched_job(tmp_path):
    from clashx.workflows._boundary import run_guarded
    from clashx.workflows._cli import build_parser

    seen = []
    policy = block_size(100_000, world=1)  # this machine's choice without a flag

    def job(_):
        seen.append(block_size(100_000, world=1))
        return 0

    for argv, expected in (
        (["generate", "--scene", "strike", "--shape", "square", "--n", "5", "--out", str(tmp_path / "g.npz")], None),
        (["optimize", "--shape", "square", "--target", "0,0,0", "--block-size", "7"], 7),
        (["generate", "--scene", "cube-toss", "--n", "5", "--out", str(tmp_path / "t.npz"), "--block-size", "64"], 64),
    ):
        a = build_parser().parse_args(argv)
        a.func = job
        assert run_guarded(a, "clashx " + " ".join(argv)) == 0
        assert seen[-1] == (expected or policy)
    assert block_size(100_000, world=1) == policy  # the override ends with the command
