"""Gradients through stiff impacts: MJX's step for reverse mode, bundled contact gradients (BCG), the strike's pose on three paths."""

from ._bcg import BCGConfig as BCGConfig
from ._bcg import bcg_scan as bcg_scan
from ._bcg import bundle_mean as bundle_mean
from ._bcg import plain_scan as plain_scan
from ._solver import reverse_mode_ready as reverse_mode_ready
from ._solver import step as step
from ._strike_grad import PATHS as PATHS
from ._strike_grad import PosePath as PosePath
from ._strike_grad import full_contact_pose as full_contact_pose
from ._strike_grad import hybrid_pose as hybrid_pose
from ._strike_grad import strike_bcg_config as strike_bcg_config
