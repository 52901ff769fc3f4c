"""clashx: impacts that simulators get right (CLASH, He et al. 2026)."""

from ._events import EventFileError as EventFileError
from ._events import load_events as load_events
from ._events import save_events as save_events
from ._geometry import SHAPES as SHAPES
from ._geometry import impact_geometry as impact_geometry
from ._params import ParamSpace as ParamSpace
from ._params import cube_space as cube_space
from ._params import strike_space as strike_space
from ._scenes import SolverSettings as SolverSettings
from ._strike import StrikeEvent as StrikeEvent
from ._strike import StrikeSim as StrikeSim
from ._strike import make_strike_sim as make_strike_sim
from ._strike import simulate_strike as simulate_strike
from ._strike import simulate_strikes_c as simulate_strikes_c

__version__ = "0.1.0"
