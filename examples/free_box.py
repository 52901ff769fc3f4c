"""A box tossed onto a table: a free joint, it tumbles, bounces and lands on a face (README: "Your own scene").

    clashx generate --scene examples/free_box.py:FreeBox --n 6000 --out box.npz
    clashx pretrain --scene examples/free_box.py:FreeBox --data box.npz --out box-model
    clashx rollout  --scene examples/free_box.py:FreeBox --model box-model --n 64 --json rollout.json

No features, targets or separation are written here: clashx's defaults see each impact in its contact frame
(MuJoCo's own distance and normal between box and table) and predict the box's change of velocity, spin,
position and orientation there.  The table is a geom of the world; its contact stays MuJoCo's between impacts.
"""

import jax
import jax.numpy as jnp
import numpy as np

from clashx import PairScene, ParamSpace
from clashx.core import Target

HALF = (0.04, 0.03, 0.02)  # m: the box's half-sizes

XML = f"""
<mujoco model="free-box">
  <option timestep="0.001" cone="pyramidal"/>
  <worldbody>
    <geom name="table" type="plane" size="3 3 0.1" contype="0" conaffinity="0"/>
    <body name="box" pos="0 0 0.2">
      <freejoint name="box"/>
      <geom name="box" type="box" size="{HALF[0]} {HALF[1]} {HALF[2]}" mass="0.2" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <contact>
    <pair name="box_table" geom1="table" geom2="box" condim="3" friction="0.4 0.4" solref="0.005 1"/>
  </contact>
</mujoco>
"""


class FreeBox(PairScene):
    """A 200 g box tossed from 2-20 cm at up to 1.5 m/s along and 2 m/s down, tumbling at up to 10 rad/s."""

    name = "free-box"
    pair = ("box", "world")
    window = 0.03  # s: the longest contact of the prior (time constant 10 ms) is over
    approach = 0.25  # s: every launch touches within this
    min_apart = 0.02  # s of flight before a touch is an impact the handler takes (rocking stays MuJoCo's)
    min_closing = 0.2  # m/s
    # The box maps onto itself turned 180° about any of its axes, and mirrored through its xz plane:
    # pretraining also learns from each impact's 7 images (clashx.scenes.symmetric_images).
    body_symmetries = ((0.0, 1.0, 0.0, 0.0), (0.0, 0.0, 1.0, 0.0), (0.0, 0.0, 0.0, 1.0))
    mirror = (1.0, -1.0, 1.0)

    def mjcf(self) -> str:
        return XML

    def make_space(self) -> ParamSpace:
        return ParamSpace(
            names=("mu", "timeconst", "dampratio"),
            low=(0.1, 0.003, 0.3),
            high=(1.0, 0.01, 1.5),
            targets=(
                (Target("pair_friction", "box_table", (0, 1)),),
                (Target("pair_solref", "box_table", (0,)),),
                (Target("pair_solref", "box_table", (1,)),),
            ),
            log_scale=(False, True, False),
        )

    def sample_launch(self, n, key):
        k = jax.random.split(key, 6)
        quat = jax.random.normal(k[0], (n, 4))
        quat = quat / jnp.linalg.norm(quat, axis=1, keepdims=True)
        w, x, y, z = quat.T  # the lowest corner's depth below the centre: Σ |R_zi| h_i
        row = jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], 1)
        depth = jnp.abs(row) @ jnp.asarray(HALF)
        height = depth + jax.random.uniform(k[1], (n,), minval=0.02, maxval=0.2)
        heading = jax.random.uniform(k[2], (n,), minval=0.0, maxval=2 * jnp.pi)
        speed = jax.random.uniform(k[3], (n,), minval=0.0, maxval=1.5)
        vz = jax.random.uniform(k[4], (n,), minval=-2.0, maxval=0.5)
        omega = jax.random.uniform(k[5], (n, 3), minval=-10.0, maxval=10.0)
        zero = jnp.zeros(n)
        qpos = jnp.concatenate([jnp.stack([zero, zero, height], 1), quat], 1)
        qvel = jnp.concatenate([jnp.stack([speed * jnp.cos(heading), speed * jnp.sin(heading), vz], 1), omega], 1)
        return np.asarray(qpos), np.asarray(qvel)
