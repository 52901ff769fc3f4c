"""A ball thrown onto a table: gravity, bounces, rolls to rest.  The whole pipeline runs on it (README: "Your own scene").

    clashx generate --scene examples/ball_on_table.py:BallOnTable --n 4000 --out ball.npz
    clashx pretrain --scene examples/ball_on_table.py:BallOnTable --data ball.npz --out ball-model
    clashx rollout  --scene examples/ball_on_table.py:BallOnTable --model ball-model --n 64 --json rollout.json

The ball moves in the x-z plane (two slides and a hinge); the table is a geom of the world.  The impact clashx
learns is ball-table, and its friction, time constant and damping ratio are the parameters identified; the
table's contact stays MuJoCo's between bounces (rolling, resting), with rolling friction to stop the ball.
"""

import jax
import jax.numpy as jnp
import numpy as np

from clashx import PairScene, ParamSpace
from clashx.core import Target

RADIUS, G = 0.03, 9.81  # m, m/s²

XML = f"""
<mujoco model="ball-on-table">
  <option timestep="0.001" cone="elliptic"/>
  <worldbody>
    <geom name="table" type="plane" size="3 3 0.1" contype="0" conaffinity="0"/>
    <body name="ball" pos="0 0 {RADIUS}">
      <joint name="x" type="slide" axis="1 0 0"/>
      <joint name="z" type="slide" axis="0 0 1"/>
      <joint name="spin" type="hinge" axis="0 1 0"/>
      <geom name="ball" type="sphere" size="{RADIUS}" mass="0.05" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <contact>
    <pair name="ball_table" geom1="table" geom2="ball" condim="6" friction="0.5 0.5 0.001 0.004 0.004"
          solref="0.005 0.3"/>
  </contact>
</mujoco>
"""


class BallOnTable(PairScene):
    """A 5 cm ball (50 g) lands at 0.15-3.5 m/s, sliding up to 1.5 m/s and spinning up to 40 rad/s."""

    name = "ball-on-table"
    pair = ("ball", "world")
    window = 0.03  # s: the longest contact of the prior (time constant 12 ms) is over
    approach = 0.1  # s: every launch touches within this
    min_apart = 0.01  # s of flight before a touch is a bounce the handler takes
    min_closing = 0.15  # m/s: slower bounces, rolling and resting are MuJoCo's

    def mjcf(self) -> str:
        return XML

    def make_space(self) -> ParamSpace:
        return ParamSpace(
            names=("mu", "timeconst", "dampratio"),
            low=(0.1, 0.003, 0.1),
            high=(1.0, 0.012, 1.0),
            targets=(
                (Target("pair_friction", "ball_table", (0, 1)),),
                (Target("pair_solref", "ball_table", (0,)),),
                (Target("pair_solref", "ball_table", (1,)),),
            ),
            log_scale=(False, True, False),
        )

    def sample_launch(self, n, key):
        k = jax.random.split(key, 4)
        speed = jnp.exp(jax.random.uniform(k[0], (n,), minval=jnp.log(0.15), maxval=jnp.log(3.5)))  # at the touch
        gap = jax.random.uniform(k[1], (n,), minval=0.002, maxval=0.05)  # m above the table at launch
        vz = -jnp.sqrt(jnp.maximum(speed**2 - 2 * G * gap, 0.01))
        vx = jax.random.uniform(k[2], (n,), minval=-1.5, maxval=1.5)
        spin = jax.random.uniform(k[3], (n,), minval=-40.0, maxval=40.0)
        zero = jnp.zeros(n)
        return np.asarray(jnp.stack([zero, gap, zero], 1)), np.asarray(jnp.stack([vx, vz, spin], 1))
