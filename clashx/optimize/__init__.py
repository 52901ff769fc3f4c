"""Using the simulator: model-based strike optimisation with CMA-ES (evosax), batched over rollouts."""

from ._optimize import MBOConfig as MBOConfig
from ._optimize import MBOResult as MBOResult
from ._optimize import identify_from_rest as identify_from_rest
from ._optimize import optimize as optimize
