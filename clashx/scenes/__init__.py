"""The simulated scenes: AbstractImpactScene, the strike (SCENE.md) and the cube toss as its instances, MJCF, geometry, parameter spaces."""

from ._geometry import SHAPES as SHAPES
from ._geometry import impact_geometry as impact_geometry
from ._pair import PairScene as PairScene
from ._pair import load_scene as load_scene
from ._registry import make_scene as make_scene
from ._scene import APART_CAP as APART_CAP
from ._scene import AbstractImpactScene as AbstractImpactScene
from ._scene import ImpactGate as ImpactGate
from ._scene import crossing as crossing
from ._scene import limit_energy as limit_energy
from ._scene import touches as touches
from ._scenes import SolverSettings as SolverSettings
from ._spaces import cube_space as cube_space
from ._spaces import strike_space as strike_space
from ._strike import StrikeEvent as StrikeEvent
from ._strike import StrikeSim as StrikeSim
from ._strike import make_strike_sim as make_strike_sim
from ._strike import simulate_strike as simulate_strike
from ._strike import simulate_strikes_c as simulate_strikes_c
from ._toss import TossEvent as TossEvent
from ._toss import TossSim as TossSim
from ._toss import make_toss_sim as make_toss_sim
from ._toss import simulate_toss as simulate_toss
from ._toss import simulate_tosses_c as simulate_tosses_c
