"""The parameter spaces of the two shipped scenes: the strike's eight (SCENE.md) and the cube toss's three."""

from __future__ import annotations

from ..core import ParamSpace, Target
from ._geometry import BLOCK_MASS

# Priors of the block's own physics (SCENE.md gives the nominal values only): a real block is
# weighed to within a few percent, machined so its centre of mass sits within millimetres of the
# footprint's centroid, and a floor resists spin beyond what sliding friction at the contact
# points gives (torsional friction, MuJoCo's condim 4: a lever of up to a few centimetres; a
# recorded slide can need ~3 cm to spin down as fast as it does).  The striker-block time constant spans the stiff side of SCENE.md's
# 5 ms: two steps of the 1 ms contact step at the least, four times SCENE.md's at the most.
MASS_RANGE = (0.2, 0.3)  # kg, nominal 0.25
COM_RANGE = (-0.008, 0.008)  # m, offset of the centre of mass from the footprint's centroid
TORSION_RANGE = (0.0, 0.04)  # m, block-ground torsional friction coefficient
TIMECONST_RANGE = (0.0025, 0.02)  # s, striker-block solref[0], log-uniform
NOMINAL_MASS = BLOCK_MASS  # kg
STRIKER_TIMECONST = 0.005  # s, SCENE.md's striker-block time constant (also `_mjcf.STRIKER_TIMECONST`)


def strike_space(n_pieces: int = 1, *, block: str = "block") -> ParamSpace:
    """The strike's identified physics: SCENE.md's contact parameters and the block's own.

    | name | meaning | prior |
    |---|---|---|
    | mu1 | striker-block friction | [0.05, 1] |
    | mu2 | block-ground friction | [0.02, 1] |
    | e1 | striker-block damping ratio (solref[1]) | [0.1, 3] |
    | timeconst1 | striker-block time constant (solref[0]), s | [0.0025, 0.02], log |
    | mass | block mass, kg (inertia scales with it: uniform density) | [0.2, 0.3] |
    | com_x, com_y | centre-of-mass offset in the block frame, m | [-0.008, 0.008] |
    | torsion | block-ground torsional friction, m | [0, 0.04] |

    Args:
        n_pieces: convex pieces of the block (`clashx.scenes._geometry.convex_pieces`);
            each contact parameter is written into the pairs of every piece.
        block: the block's body name.
    """
    ks = range(n_pieces)

    def pairs(name, field, cols):
        return tuple(Target(field, f"{name}_{k}", cols) for k in ks)

    return ParamSpace(
        names=("mu1", "mu2", "e1", "timeconst1", "mass", "com_x", "com_y", "torsion"),
        low=(0.05, 0.02, 0.1, TIMECONST_RANGE[0], MASS_RANGE[0], COM_RANGE[0], COM_RANGE[0], TORSION_RANGE[0]),
        high=(1.0, 1.0, 3.0, TIMECONST_RANGE[1], MASS_RANGE[1], COM_RANGE[1], COM_RANGE[1], TORSION_RANGE[1]),
        targets=(
            pairs("striker_block", "pair_friction", (0, 1)),
            pairs("block_ground", "pair_friction", (0, 1)),
            pairs("striker_block", "pair_solref", (1,)),
            pairs("striker_block", "pair_solref", (0,)),
            (
                Target("body_mass", block, (0,), kind="body"),
                Target("body_inertia", block, (0, 1, 2), kind="body", mode="scale", ref=NOMINAL_MASS),
            ),
            (Target("body_ipos", block, (0,), kind="body", mode="offset"),),
            (Target("body_ipos", block, (1,), kind="body", mode="offset"),),
            pairs("block_ground", "pair_friction", (2,)),
        ),
        log_scale=(False, False, False, True, False, False, False, False),
        nominal=(0.5, 0.5, 1.0, STRIKER_TIMECONST, NOMINAL_MASS, 0.0, 0.0, 0.0),
    )


def contact_space(n_pieces: int = 1) -> ParamSpace:
    """SCENE.md's three contact parameters alone (μ1, μ2, e1): the space of CLASH's paper and of older checkpoints."""
    ks = range(n_pieces)
    return ParamSpace(
        names=("mu1", "mu2", "e1"),
        low=(0.05, 0.02, 0.1),
        high=(1.0, 1.0, 3.0),
        targets=(
            tuple(Target("pair_friction", f"striker_block_{k}", (0, 1)) for k in ks),
            tuple(Target("pair_friction", f"block_ground_{k}", (0, 1)) for k in ks),
            tuple(Target("pair_solref", f"striker_block_{k}", (1,)) for k in ks),
        ),
        log_scale=(False, False, False),
        nominal=(0.5, 0.5, 1.0),
    )


def cube_space(inertia: bool = False) -> ParamSpace:
    """Contact parameters of the cube toss: friction, time constant and damping ratio of the cube-table contact.

    The table touches the cube at its eight corners, one pair each
    (`_mjcf.CUBE_PAIRS`); every parameter is written into all eight.  With
    `inertia`, a fourth parameter scales the cube's principal inertia
    (× the model's own: the drawing's in `make_toss_scene()`'s; 0.6-3, as the
    rigid law's `RIGID_LOW`/`RIGID_HIGH`): the
    mass distribution, which the three contact knobs hold fixed (MuJoCo C
    models only: `prepare` them first; the shipped cube surrogate is not
    conditioned on it).
    """
    pairs = tuple(f"cube_table{i}" for i in range(8))  # _mjcf.CUBE_PAIRS (no import: _mjcf is MJCF only)
    names: tuple[str, ...] = ("mu", "timeconst", "dampratio")
    low: tuple[float, ...] = (0.05, 0.002, 0.1)
    high: tuple[float, ...] = (0.6, 0.04, 2.0)
    targets: tuple[tuple[Target, ...], ...] = (
        tuple(Target("pair_friction", p, (0, 1)) for p in pairs),
        tuple(Target("pair_solref", p, (0,)) for p in pairs),
        tuple(Target("pair_solref", p, (1,)) for p in pairs),
    )
    log_scale: tuple[bool, ...] = (False, True, False)
    if inertia:
        names, low, high = names + ("inertia",), low + (0.6,), high + (3.0,)
        targets = targets + ((Target("body_inertia", "cube", (0, 1, 2), kind="body", mode="scale", ref=1.0),),)
        log_scale = log_scale + (False,)
    return ParamSpace(names=names, low=low, high=high, targets=targets, log_scale=log_scale)
