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
from ._data import data_path as data_path
from ._finetune import FinetuneConfig as FinetuneConfig
from ._finetune import finetune as finetune
from ._generate import GenerateConfig as GenerateConfig
from ._generate import generate as generate
from ._identify import IdentifyResult as IdentifyResult
from ._identify import identify as identify
from ._ingest import ingest_strike_file as ingest_strike_file
from ._ingest_cube import ingest_cube_tosses as ingest_cube_tosses
from ._metrics import alpha_accuracy as alpha_accuracy
from ._metrics import alpha_curve as alpha_curve
from ._metrics import relative_error as relative_error
from ._pretrain import PretrainConfig as PretrainConfig
from ._pretrain import pretrain as pretrain
from ._surrogate import Surrogate as Surrogate
from ._surrogate import load_surrogate as load_surrogate
from ._surrogate import make_surrogate as make_surrogate
from ._surrogate import predict as predict
from ._surrogate import save_surrogate as save_surrogate
from ._toss import TossEvent as TossEvent
from ._toss import TossSim as TossSim
from ._toss import make_toss_sim as make_toss_sim
from ._toss import simulate_toss as simulate_toss
from ._toss import simulate_tosses_c as simulate_tosses_c
