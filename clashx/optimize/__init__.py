"""Using the simulator: model-based strike optimisation with CMA-ES (evosax), batched over rollouts."""

from ._optimize import MBOConfig as MBOConfig
from ._optimize import MBOResult as MBOResult
from ._optimize import cached_hybrid as cached_hybrid
from ._optimize import clip_to_ranges as clip_to_ranges
from ._optimize import cmaes_in_box as cmaes_in_box
from ._optimize import describe as describe
from ._optimize import identify_from_rest as identify_from_rest
from ._optimize import make_evaluator as make_evaluator
from ._optimize import optimize as optimize
from ._optimize import optimize_host as optimize_host
from ._optimize import optimize_jit as optimize_jit
from ._optimize import optimize_many as optimize_many
from ._optimize import optimize_many_host as optimize_many_host
from ._optimize import optimize_many_jit as optimize_many_jit
from ._optimize import pose_error as pose_error
from ._optimize import strikes_of_unit as strikes_of_unit
from ._optimize import to_start_frame as to_start_frame
from ._optimize import to_world as to_world
from ._optimize import wrap as wrap
from ._plan import LABEL_NOISE as LABEL_NOISE
from ._plan import PlanConfig as PlanConfig
from ._plan import model_error as model_error
from ._plan import plan as plan
