"""Batches spread over several devices with jax.sharding give the one-device results.

Two CPU devices are made with XLA_FLAGS=--xla_force_host_platform_device_count=2 in a fresh process (the
flag must be set before JAX starts); the same script on one device is the reference.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

SHARD_TOL = 1e-5  # float32 sums reordered across devices

SCRIPT = r"""
import sys
import equinox as eqx
import jax, jax.numpy as jnp, numpy as np
import clashx
from clashx.core import batch_mesh, map_batched, shard_batch
from clashx.events._generate import sample_strikes
from clashx.scenes import _strike
from clashx.surrogate._strike_surrogate import velocity_loss
from clashx.scenes._geometry import characteristic_length

n_dev = jax.local_device_count()
mesh = batch_mesh()
assert (mesh is None) == (n_dev == 1), n_dev
sim = clashx.make_strike_scene("square")
strikes = sample_strikes(6, key=jax.random.PRNGKey(0))  # 6: blocks of 3 per device, no padding
params = sim.space.sample(6, key=jax.random.PRNGKey(1))
ev = _strike.simulate_strikes_mjx(sim, strikes, params, to_rest=False)
if n_dev > 1:
    assert len(ev.post_velocity.sharding.device_set) == n_dev, ev.post_velocity.sharding
odd = map_batched(lambda x: jnp.sin(x) * x[0], jnp.arange(15.0).reshape(5, 3), batch_size=2)  # padded: 5 rows

model = clashx.shipped_strike_surrogate("square")
s, p = shard_batch((strikes, params))
v = jnp.asarray(ev.post_velocity)
length = characteristic_length("square")
loss, grad = eqx.filter_jit(eqx.filter_value_and_grad(lambda m: velocity_loss(jax.vmap(m.release)(s, p)[:, :3], v, length)))(model)
flat = jnp.concatenate([g.ravel() for g in jax.tree.leaves(eqx.filter(grad, eqx.is_inexact_array))])
np.savez(sys.argv[1], velocity=np.asarray(ev.post_velocity), odd=np.asarray(odd), loss=float(loss), grad=np.asarray(flat))
"""


def _run(tmp_path, devices: int) -> dict:
    out = tmp_path / f"shard_{devices}.npz"
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(out)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(np.load(out))


def test_two_devices_give_the_one_device_results(tmp_path):
    """MJX strikes (map_batched), a padded map and a data-parallel surrogate gradient, 1 device against 2."""
    one, two = _run(tmp_path, 1), _run(tmp_path, 2)
    np.testing.assert_allclose(two["velocity"], one["velocity"], atol=SHARD_TOL)
    x = np.arange(15.0).reshape(5, 3)
    np.testing.assert_allclose(one["odd"], np.sin(x) * x[:, :1], rtol=1e-6)
    np.testing.assert_allclose(two["odd"], one["odd"], rtol=1e-6)
    assert abs(float(two["loss"]) - float(one["loss"])) <= SHARD_TOL * max(1.0, abs(float(one["loss"])))
    np.testing.assert_allclose(two["grad"], one["grad"], rtol=1e-4, atol=SHARD_TOL)
