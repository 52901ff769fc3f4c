"""A can tossed onto a table: a free cylinder that lands on its rim, rolls or topples (issue 52's unseen scene).

    clashx generate --scene examples/free_can.py:FreeCan --n 6000 --out can.npz
    clashx pretrain --scene examples/free_can.py:FreeCan --data can.npz --out can-model
    clashx rollout  --scene examples/free_can.py:FreeCan --model can-model --n 64 --json rollout.json

Written after the free box, with another shape, size, mass and prior, so that what was measured on the box is
checked on a scene nothing was tuned on.  As the box, it uses clashx's defaults alone: MuJoCo's own distance
(the cylinder's rim against the plane), the contact frame's features, the change of state as targets.
"""

import jax
import jax.numpy as jnp
import numpy as np

from clashx import PairScene, ParamSpace
from clashx.core import Target

RADIUS, HALF_HEIGHT = 0.033, 0.06  # m: a 66 mm wide, 120 mm tall can

XML = f"""
<mujoco model="free-can">
  <option timestep="0.001" cone="pyramidal"/>
  <worldbody>
    <geom name="table" type="plane" size="3 3 0.1" contype="0" conaffinity="0"/>
    <body name="can" pos="0 0 0.3">
      <freejoint name="can"/>
      <geom name="can" type="cylinder" size="{RADIUS} {HALF_HEIGHT}" mass="0.35" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <contact>
    <pair name="can_table" geom1="table" geom2="can" condim="3" friction="0.5 0.5" solref="0.006 0.8"/>
  </contact>
</mujoco>
"""


class FreeCan(PairScene):
    """A 350 g can tossed from 3-25 cm above the table at up to 1 m/s along and 2.5 m/s down, spinning at up to 8 rad/s."""

    name = "free-can"
    pair = ("can", "world")
    window = 0.04  # s: the prior's longest contact (time constant 12 ms, damping ratio 1.2) is over
    approach = 0.3  # s: every launch touches within this
    min_apart = 0.02  # s of flight before a touch is an impact the handler takes (rocking stays MuJoCo's)
    min_closing = 0.2  # m/s
    # A cylinder maps onto itself turned about its axis (here half a turn) and flipped end over end (half a turn
    # about x or y), and mirrored: pretraining also learns from each impact's 7 images (clashx.scenes.symmetric_images).
    body_symmetries = ((0.0, 1.0, 0.0, 0.0), (0.0, 0.0, 1.0, 0.0), (0.0, 0.0, 0.0, 1.0))
    mirror = (1.0, -1.0, 1.0)

    def mjcf(self) -> str:
        return XML

    def make_space(self) -> ParamSpace:
        return ParamSpace(
            names=("mu", "timeconst", "dampratio"),
            low=(0.2, 0.004, 0.4),
            high=(0.9, 0.012, 1.2),
            targets=(
                (Target("pair_friction", "can_table", (0, 1)),),
                (Target("pair_solref", "can_table", (0,)),),
                (Target("pair_solref", "can_table", (1,)),),
            ),
            log_scale=(False, True, False),
        )

    def sample_launch(self, n, key):
        k = jax.random.split(key, 6)
        quat = jax.random.normal(k[0], (n, 4))
        quat = quat / jnp.linalg.norm(quat, axis=1, keepdims=True)
        w, x, y, z = quat.T
        axis_z = 1 - 2 * (x * x + y * y)  # the can's axis, its world z component
        tilt = jnp.sqrt(jnp.clip(1 - axis_z**2, 0.0, 1.0))
        depth = RADIUS * tilt + HALF_HEIGHT * jnp.abs(axis_z)  # the rim's lowest point below the centre
        height = depth + jax.random.uniform(k[1], (n,), minval=0.03, maxval=0.25)
        heading = jax.random.uniform(k[2], (n,), minval=0.0, maxval=2 * jnp.pi)
        speed = jax.random.uniform(k[3], (n,), minval=0.0, maxval=1.0)
        vz = jax.random.uniform(k[4], (n,), minval=-2.5, maxval=0.3)
        omega = jax.random.uniform(k[5], (n, 3), minval=-8.0, maxval=8.0)
        zero = jnp.zeros(n)
        qpos = jnp.concatenate([jnp.stack([zero, zero, height], 1), quat], 1)
        qvel = jnp.concatenate([jnp.stack([speed * jnp.cos(heading), speed * jnp.sin(heading), vz], 1), omega], 1)
        return np.asarray(qpos), np.asarray(qvel)
