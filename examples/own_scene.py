"""A scene clashx does not ship: a paddle strikes a puck on a table.  The whole pipeline runs on it:

    clashx generate --scene examples/own_scene.py:PaddlePuck --n 4000 --out puck.npz
    clashx pretrain --scene examples/own_scene.py:PaddlePuck --data puck.npz --out puck-model
    clashx rollout  --scene examples/own_scene.py:PaddlePuck --model puck-model --n 64 --json rollout.json

(README: "Your own scene").  The paddle is a capsule on two slide joints; the puck a sphere on two slides and a
hinge, held to the table plane, with the table's friction as joint friction.  The impact clashx learns is
paddle-puck; its friction, time constant and damping ratio are the parameters identified.
"""

import jax
import jax.numpy as jnp
import numpy as np

from clashx import PairScene, ParamSpace
from clashx.core import Target

PADDLE_HALF, PADDLE_R, PUCK_R = 0.05, 0.01, 0.03  # m

XML = f"""
<mujoco model="paddle-puck">
  <option timestep="0.001" gravity="0 0 0" cone="elliptic"/>
  <worldbody>
    <geom name="table" type="plane" size="1 1 0.1" contype="0" conaffinity="0"/>
    <body name="paddle" pos="0 0 0.03">
      <joint name="paddle_x" type="slide" axis="1 0 0" damping="5" frictionloss="0.5"/>
      <joint name="paddle_y" type="slide" axis="0 1 0" damping="5" frictionloss="0.5"/>
      <geom name="paddle" type="capsule" fromto="0 -{PADDLE_HALF} 0 0 {PADDLE_HALF} 0" size="{PADDLE_R}"
            mass="1" contype="0" conaffinity="0"/>
    </body>
    <body name="puck" pos="0 0 0.03">
      <joint name="puck_x" type="slide" axis="1 0 0" frictionloss="0.1" damping="0.02"/>
      <joint name="puck_y" type="slide" axis="0 1 0" frictionloss="0.1" damping="0.02"/>
      <joint name="puck_yaw" type="hinge" axis="0 0 1" frictionloss="0.001"/>
      <geom name="puck" type="sphere" size="{PUCK_R}" mass="0.1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <contact>
    <pair name="paddle_puck" geom1="paddle" geom2="puck" condim="3" friction="0.3 0.3" solref="0.004 1"/>
  </contact>
</mujoco>
"""


class PaddlePuck(PairScene):
    """A paddle (capsule, 1 kg) strikes a puck (sphere, 0.1 kg): speeds 0.3-1.5 m/s, off-centre up to 6 cm."""

    name = "paddle-puck"
    pair = ("paddle", "puck")
    window = 0.03  # s: the longest contact of the prior (time constant 10 ms) is over
    approach = 0.2  # s: the slowest launch touches within this

    def mjcf(self) -> str:
        return XML

    def make_space(self) -> ParamSpace:
        return ParamSpace(
            names=("mu", "timeconst", "dampratio"),
            low=(0.05, 0.002, 0.2),
            high=(0.8, 0.01, 1.5),
            targets=(
                (Target("pair_friction", "paddle_puck", (0, 1)),),
                (Target("pair_solref", "paddle_puck", (0,)),),
                (Target("pair_solref", "paddle_puck", (1,)),),
            ),
            log_scale=(False, True, False),
        )

    def sample_launch(self, n, key):
        k = jax.random.split(key, 4)
        gap = jax.random.uniform(k[0], (n,), minval=0.005, maxval=0.03)
        offset = jax.random.uniform(k[1], (n,), minval=-0.06, maxval=0.06)
        speed = jax.random.uniform(k[2], (n,), minval=0.3, maxval=1.5)
        heading = jax.random.uniform(k[3], (n,), minval=-0.3, maxval=0.3)
        zero = jnp.zeros(n)
        qpos = jnp.stack([zero, zero, PADDLE_R + PUCK_R + gap, offset, zero], axis=1)
        qvel = jnp.stack([speed * jnp.cos(heading), speed * jnp.sin(heading), zero, zero, zero], axis=1)
        return np.asarray(qpos), np.asarray(qvel)

    def separation(self, qpos):
        rel = qpos[2:4] - qpos[0:2]  # puck centre from the paddle's
        along = jnp.clip(rel[1], -PADDLE_HALF, PADDLE_HALF)  # nearest point of the capsule's axis
        return jnp.sqrt(rel[0] ** 2 + (rel[1] - along) ** 2 + 1e-12) - PADDLE_R - PUCK_R

    def features(self, pre):
        # pair state: paddle x, y; puck x, y, yaw | their velocities (5).  Translation-invariant.
        rel = pre[2:4] - pre[0:2]
        return jnp.concatenate([rel / PUCK_R, pre[5:7], pre[7:9] - pre[5:7], pre[9:10] * PUCK_R])
