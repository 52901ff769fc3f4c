"""MuJoCo models of the two scenes: the strike (SCENE.md) and the cube toss (ContactNets).

Each builder returns an MJCF string; `compile_*` turn it into an `mujoco.MjModel`.
Contacts come only from explicit pairs (every geom has contype = conaffinity = 0),
so each contact parameter acts on exactly one pair: μ1 and e1 between striker
and block, μ2 between block and ground.
"""

from __future__ import annotations

import copy
import dataclasses
import functools

import mujoco
import numpy as np

from . import _geometry as geo
from ._spaces import STRIKER_TIMECONST as STRIKER_TIMECONST  # SCENE.md's striker-block time constant, s


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
        cone: "pyramidal" or "elliptic" friction cone.  The strike uses the
            elliptic cone: with the lab's true parameters it puts 0.75 / 0.61 /
            0.62 (square / triangle / semi-cylinder) of 300 lab impacts within
            α = 0.1, the pyramidal 0.61 / 0.47 / 0.57 (its friction is
            anisotropic, up to √2 apart by direction); the block's slide after
            release matches recorded tracks to the noise only with it.  The
            cube toss keeps the pyramidal cone its shipped surrogate was trained on.
    """

    dt_contact: float = 0.001
    dt_slide: float = 0.004
    iterations: int = 16
    ls_iterations: int = 8
    solver: str = "Newton"
    cone: str = "elliptic"

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
    shape: str,
    solver: SolverSettings = SolverSettings(),
    *,
    touch_sensor: bool = False,
    striker_pair: bool = True,
    params: dict[str, float] | None = None,
) -> str:
    """MJCF of the strike scene for one block shape, nominal parameters unless `params` are given.

    The block has a free joint; its body frame is SCENE.md's block frame.  The
    striker moves on two world-aligned slide joints and a yaw hinge at the
    block's half height, so gravity never acts on it and it never reaches the
    ground.  `touch_sensor` adds a contact sensor (MuJoCo C only) that reports
    how many striker-block contacts the collision pass found;
    `striker_pair=False` leaves the striker-block pair out (the slide phase,
    after the arm has pulled the striker away, needs no collision test for it).
    `params` ({name: value} of `strike_space()`, any subset) writes those
    values into the XML itself: the reference that `ParamSpace.apply` is
    tested against (mass and centre of mass become an explicit `<inertial>`).
    The block-ground pairs have condim 4 (torsional friction, 0 by default).
    The block is compiled `simple="false"` (a full mass matrix), so that a
    centre-of-mass offset written later finds the coupling terms' places.
    """
    geo.check_shape(shape)
    p = {"mu1": 0.5, "mu2": 0.5, "e1": 1.0, "timeconst1": STRIKER_TIMECONST, "torsion": 0.0} | (params or {})
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
        f'<pair name="striker_block_{k}" geom1="striker" geom2="block_{k}" condim="3" '
        f'friction="{p["mu1"]:.10g} {p["mu1"]:.10g} 0 0 0" solref="{p["timeconst1"]:.10g} {p["e1"]:.10g}"/>'
        for k in range(len(pieces))
        if striker_pair
    ) + "".join(
        f'<pair name="block_ground_{k}" geom1="ground" geom2="block_{k}" condim="4" '
        f'friction="{p["mu2"]:.10g} {p["mu2"]:.10g} {p["torsion"]:.10g} 0 0"/>'
        for k in range(len(pieces))
    )
    inertial = _block_inertial(shape, solver, p) if {"mass", "com_x", "com_y"} & set(p) else ""
    return f"""<mujoco model="clashx-strike-{shape}">
  {solver.option_xml()}
  {asset}
  <worldbody>
    <geom name="ground" type="plane" size="0 0 1" contype="0" conaffinity="0"/>
    <body name="block" pos="0 0 {h}" simple="false">
      <freejoint name="block"/>
      {inertial}{"".join(block_geoms)}
    </body>
    <body name="striker" pos="5 5 {h}">
      <joint name="striker_x" type="slide" axis="1 0 0"/>
      <joint name="striker_y" type="slide" axis="0 1 0"/>
      <joint name="striker_yaw" type="hinge" axis="0 0 1"/>
      <geom name="striker" type="box" size="{sh} {sh} {sh}" mass="{geo.STRIKER_MASS}" contype="0" conaffinity="0"/>
    </body>
  </worldbody>{_closing(pairs, sensor)}"""


def _block_inertial(shape: str, solver: SolverSettings, p: dict[str, float]) -> str:
    """An explicit `<inertial>` for the block: the nominal (uniform) one, mass scaled and centre of mass offset."""
    m = compile_xml(strike_xml(shape, solver))
    b = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "block")
    mass = p.get("mass", float(m.body_mass[b]))
    pos = m.body_ipos[b] + np.array([p.get("com_x", 0.0), p.get("com_y", 0.0), 0.0])
    inertia = m.body_inertia[b] * mass / m.body_mass[b]
    return (
        f'<inertial pos="{_fmt(pos)}" quat="{_fmt(m.body_iquat[b])}" mass="{mass:.10g}" diaginertia="{_fmt(inertia)}"/>'
    )


# The ContactNets cube (shared/data/contactnets_cube/README.md).
CUBE_HALF = 0.0524  # half edge (m)
CUBE_MASS = 0.37  # kg
CUBE_INERTIA = 8.1e-4  # principal inertia (kg m^2), dair_pll's model
CUBE_FRICTION = 0.15


CUBE_CORNER_RADIUS = 1e-4  # m, the corner spheres that touch the table (cube_xml)
CUBE_PAIRS = tuple(f"cube_table{i}" for i in range(8))  # one table contact pair per corner


def cube_xml(
    solver: SolverSettings = SolverSettings(dt_contact=0.001, dt_slide=0.001, cone="pyramidal"),
    *,
    touch_sensor: bool = False,
    inertia: float = CUBE_INERTIA,
) -> str:
    """MJCF of the cube-toss scene: a free cube above the table plane z = 0, nominal parameters.

    The cube's body frame is at its centre with axes along its edges.  The
    table touches the cube through eight tiny spheres inside its corners, one
    pair each (`CUBE_PAIRS`): a box meets a plane only at its corners, and
    sphere-plane contacts are the same in MuJoCo C and MJX, whereas their
    box-plane tests differ once a corner sinks deeper than 1 mm (MJX keeps only
    the corners within 1 mm of the deepest one).  The box geom is for display.
    `touch_sensor` adds a contact sensor (MuJoCo C only) that reports how many
    cube-table contacts the collision pass found.  `inertia` is the cube's principal
    moment of inertia, kg m² (default the drawing's, `CUBE_INERTIA`).
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
      <inertial pos="0 0 0" mass="{CUBE_MASS}" diaginertia="{inertia!r} {inertia!r} {inertia!r}"/>
      <geom name="cube" type="box" size="{c} {c} {c}" contype="0" conaffinity="0" mass="0"/>
      {corners}
    </body>
  </worldbody>{_closing(pairs, sensor)}"""


def _closing(pairs: str, sensor: str) -> str:
    """The end of a scene's MJCF after its worldbody: the explicit contact pairs, the sensors."""
    return f"""
  <contact>
    {pairs}
  </contact>
  {sensor}
</mujoco>"""


def compile_xml(xml: str) -> mujoco.MjModel:
    """Compile an MJCF string into a MuJoCo model (a fresh copy; each text is compiled once)."""
    return copy.copy(_compiled(xml))


@functools.lru_cache(maxsize=32)
def _compiled(xml: str) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(xml)
