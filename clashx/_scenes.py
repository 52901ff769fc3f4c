"""MuJoCo models of the two scenes: the strike (SCENE.md) and the cube toss (ContactNets).

Each builder returns an MJCF string; `compile_*` turn it into an `mujoco.MjModel`.
Contacts come only from explicit pairs (every geom has contype = conaffinity = 0),
so each contact parameter acts on exactly one pair: μ1 and e1 between striker
and block, μ2 between block and ground.
"""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

from . import _geometry as geo

# The striker-block pair's time constant (SCENE.md); the damping ratio e1 is identified.
STRIKER_TIMECONST = 0.005


@dataclasses.dataclass(frozen=True)
class SolverSettings:
    """Integrator and constraint-solver settings shared by MuJoCo C and MJX.

    Attributes:
        dt_contact: timestep while the striker can touch the block (s); the
            pair's time constant of 0.005 s needs at least 2 steps per constant.
        dt_slide: timestep after the arm pulls the striker away (s): only the
            block-ground contact (time constant 0.02 s) is left.
        iterations: constraint-solver iterations (MJX needs 8-16 to agree with C here).
        ls_iterations: line-search iterations of the Newton solver.
        solver: "Newton" or "CG".
        cone: "pyramidal" or "elliptic" friction cone.
    """

    dt_contact: float = 0.001
    dt_slide: float = 0.004
    iterations: int = 16
    ls_iterations: int = 8
    solver: str = "Newton"
    cone: str = "pyramidal"

    def option_xml(self) -> str:
        return (
            f'<option timestep="{self.dt_contact}" iterations="{self.iterations}" '
            f'ls_iterations="{self.ls_iterations}" solver="{self.solver}" cone="{self.cone}"/>'
        )


def _fmt(values) -> str:
    return " ".join(f"{v:.10g}" for v in np.ravel(values))


def prism_vertices(ring: np.ndarray) -> np.ndarray:
    """Vertices of a prism over the footprint polygon `ring` in the block frame, (2N, 3) metres."""
    z = geo.HEIGHT / 2
    return np.concatenate([np.c_[ring, np.full(len(ring), -z)], np.c_[ring, np.full(len(ring), z)]])


def strike_xml(
    shape: str, solver: SolverSettings = SolverSettings(), *, touch_sensor: bool = False, striker_pair: bool = True
) -> str:
    """MJCF of the strike scene for one block shape, nominal parameters.

    The block has a free joint; its body frame is SCENE.md's block frame.  The
    striker moves on two world-aligned slide joints and a yaw hinge at the
    block's half height, so gravity never acts on it and it never reaches the
    ground.  `touch_sensor` adds a contact sensor (MuJoCo C only) that reports
    how many striker-block contacts the collision pass found;
    `striker_pair=False` leaves the striker-block pair out (the slide phase,
    after the arm has pulled the striker away, needs no collision test for it).
    """
    geo.check_shape(shape)
    h = geo.HEIGHT / 2
    pieces = geo.convex_pieces(shape)
    if shape == "square":
        sq = geo.SQUARE_SIDE / 2
        asset = ""
        block_geoms = [
            f'<geom name="block_0" type="box" size="{sq} {sq} {h}" mass="{geo.BLOCK_MASS}" contype="0" conaffinity="0"/>'
        ]
    else:
        density = geo.BLOCK_MASS / (sum(geo.polygon_area(p) for p in pieces) * geo.HEIGHT)  # uniform, 0.25 kg in all
        asset = (
            "<asset>"
            + "".join(f'<mesh name="block_{k}" vertex="{_fmt(prism_vertices(p))}"/>' for k, p in enumerate(pieces))
            + "</asset>"
        )
        block_geoms = [
            f'<geom name="block_{k}" type="mesh" mesh="block_{k}" density="{density:.10g}" contype="0" conaffinity="0"/>'
            for k in range(len(pieces))
        ]
    sensor = (
        '<sensor><contact name="touch" geom1="striker" body2="block" data="found dist normal" reduce="mindist" num="1"/></sensor>'
        if touch_sensor
        else ""
    )
    sh = geo.STRIKER_HALF
    pairs = "".join(
        f'<pair name="striker_block_{k}" geom1="striker" geom2="block_{k}" condim="3" friction="0.5 0.5 0 0 0" '
        f'solref="{STRIKER_TIMECONST} 1"/>'
        for k in range(len(pieces))
        if striker_pair
    ) + "".join(
        f'<pair name="block_ground_{k}" geom1="ground" geom2="block_{k}" condim="3" friction="0.5 0.5 0 0 0"/>'
        for k in range(len(pieces))
    )
    return f"""<mujoco model="clashx-strike-{shape}">
  {solver.option_xml()}
  {asset}
  <worldbody>
    <geom name="ground" type="plane" size="0 0 1" contype="0" conaffinity="0"/>
    <body name="block" pos="0 0 {h}">
      <freejoint name="block"/>
      {"".join(block_geoms)}
    </body>
    <body name="striker" pos="5 5 {h}">
      <joint name="striker_x" type="slide" axis="1 0 0"/>
      <joint name="striker_y" type="slide" axis="0 1 0"/>
      <joint name="striker_yaw" type="hinge" axis="0 0 1"/>
      <geom name="striker" type="box" size="{sh} {sh} {sh}" mass="{geo.STRIKER_MASS}" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <contact>
    {pairs}
  </contact>
  {sensor}
</mujoco>"""


# The ContactNets cube (shared/data/contactnets_cube/README.md).
CUBE_HALF = 0.0524  # half edge (m)
CUBE_MASS = 0.37  # kg
CUBE_INERTIA = 8.1e-4  # principal inertia (kg m^2), dair_pll's model
CUBE_FRICTION = 0.15


CUBE_CORNER_RADIUS = 1e-4  # m, the corner spheres that touch the table (cube_xml)
CUBE_PAIRS = tuple(f"cube_table{i}" for i in range(8))  # one table contact pair per corner


def cube_xml(
    solver: SolverSettings = SolverSettings(dt_contact=0.001, dt_slide=0.001), *, touch_sensor: bool = False
) -> str:
    """MJCF of the cube-toss scene: a free cube above the table plane z = 0, nominal parameters.

    The cube's body frame is at its centre with axes along its edges.  The
    table touches the cube through eight tiny spheres inside its corners, one
    pair each (`CUBE_PAIRS`): a box meets a plane only at its corners, and
    sphere-plane contacts are the same in MuJoCo C and MJX, whereas their
    box-plane tests differ once a corner sinks deeper than 1 mm (MJX keeps only
    the corners within 1 mm of the deepest one).  The box geom is for display.
    `touch_sensor` adds a contact sensor (MuJoCo C only) that reports how many
    cube-table contacts the collision pass found.
    """
    c = CUBE_HALF
    r = CUBE_CORNER_RADIUS
    k = c - r  # corner sphere centres: each sphere touches the three faces of its corner
    corners = "\n      ".join(
        f'<geom name="corner{i}" type="sphere" size="{r}" pos="{sx * k} {sy * k} {sz * k}" group="3" '
        'contype="0" conaffinity="0" mass="0"/>'
        for i, (sx, sy, sz) in enumerate((sx, sy, sz) for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1))
    )
    pairs = "\n    ".join(
        f'<pair name="{name}" geom1="table" geom2="corner{i}" condim="3" '
        f'friction="{CUBE_FRICTION} {CUBE_FRICTION} 0 0 0" solref="0.02 1"/>'
        for i, name in enumerate(CUBE_PAIRS)
    )
    sensor = (
        '<sensor><contact name="touch" geom1="table" body2="cube" data="found" reduce="mindist" num="1"/></sensor>'
        if touch_sensor
        else ""
    )
    return f"""<mujoco model="clashx-cube-toss">
  {solver.option_xml()}
  <worldbody>
    <geom name="table" type="plane" size="0 0 1" contype="0" conaffinity="0"/>
    <body name="cube" pos="0 0 0.2">
      <freejoint name="cube"/>
      <inertial pos="0 0 0" mass="{CUBE_MASS}" diaginertia="{CUBE_INERTIA} {CUBE_INERTIA} {CUBE_INERTIA}"/>
      <geom name="cube" type="box" size="{c} {c} {c}" contype="0" conaffinity="0" mass="0"/>
      {corners}
    </body>
  </worldbody>
  <contact>
    {pairs}
  </contact>
  {sensor}
</mujoco>"""


def compile_xml(xml: str) -> mujoco.MjModel:
    """Compile an MJCF string into a MuJoCo model."""
    return mujoco.MjModel.from_xml_string(xml)
