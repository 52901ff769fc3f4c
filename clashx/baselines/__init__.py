"""Baselines the method is measured against: MuJoCo/MJX identified (CMA-ES, mujoco.sysid, gradient), MLPs."""

from ._baselines import CONTACT_NAMES as CONTACT_NAMES
from ._baselines import MLPConfig as MLPConfig
from ._baselines import choose_weight_decay as choose_weight_decay
from ._baselines import identify_cmaes as identify_cmaes
from ._baselines import identify_mjx as identify_mjx
from ._baselines import nominal_params as nominal_params
from ._baselines import predict_c as predict_c
from ._baselines import predict_mjx as predict_mjx
from ._baselines import predict_mlp as predict_mlp
from ._baselines import train_velocity_mlp as train_velocity_mlp
from ._cube_fit import HORIZONS as HORIZONS
from ._cube_fit import fit_between_impacts as fit_between_impacts
from ._cube_fit import identify_rigid_impacts as identify_rigid_impacts
from ._cube_fit import identify_sysid as identify_sysid
from ._cube_fit import identify_trajectory_mjx as identify_trajectory_mjx
from ._cube_fit import impact_posts as impact_posts
from ._cube_fit import impact_speed_errors as impact_speed_errors
from ._cube_fit import pad_tracks as pad_tracks
from ._cube_fit import rollout_c as rollout_c
from ._cube_fit import speed_vector as speed_vector
from ._cube_fit import speed_vectors as speed_vectors
from ._cube_fit import trajectory_errors as trajectory_errors
from ._cube_fit import trajectory_residuals as trajectory_residuals
from ._cube_sigma import impact_calibration as impact_calibration
from ._cube_sigma import impact_predictive as impact_predictive
from ._strike_sysid import identify_tracks_sysid as identify_tracks_sysid
