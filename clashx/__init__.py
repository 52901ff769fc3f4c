"""clashx: impacts that simulators get right (CLASH, He et al. 2026)."""

from .core import ParameterError as ParameterError
from .core import ParamSpace as ParamSpace
from .events import EventFileError as EventFileError
from .events import Events as Events
from .events import GenerateConfig as GenerateConfig
from .events import GenerateResult as GenerateResult
from .events import alpha_accuracy as alpha_accuracy
from .events import alpha_curve as alpha_curve
from .events import data_path as data_path
from .events import generate as generate
from .events import ingest_cube_tosses as ingest_cube_tosses
from .events import ingest_strike_file as ingest_strike_file
from .events import lab_recording as lab_recording
from .events import load_events as load_events
from .events import relative_error as relative_error
from .events import save_events as save_events
from .events import track_label_sigma as track_label_sigma
from .hybrid import HybridState as HybridState
from .hybrid import HybridSystem as HybridSystem
from .hybrid import Query as Query
from .hybrid import Rollouts as Rollouts
from .hybrid import StrikeHybrid as StrikeHybrid
from .hybrid import StrikeHybridResult as StrikeHybridResult
from .hybrid import TossFrames as TossFrames
from .hybrid import full_rollouts_c as full_rollouts_c
from .hybrid import hybrid_step as hybrid_step
from .hybrid import hybrid_system as hybrid_system
from .hybrid import hybrid_toss as hybrid_toss
from .hybrid import hybrid_toss_every as hybrid_toss_every
from .hybrid import hybrid_tosses as hybrid_tosses
from .hybrid import hybrid_track as hybrid_track
from .hybrid import init_state as init_state
from .hybrid import make_strike_hybrid as make_strike_hybrid
from .hybrid import rollouts as rollouts
from .hybrid import rollouts_c as rollouts_c
from .hybrid import strike_rollout as strike_rollout
from .hybrid import strike_rollouts as strike_rollouts
from .hybrid import strike_rollouts_c as strike_rollouts_c
from .hybrid import track_loss as track_loss
from .learn import DistilResult as DistilResult
from .learn import FamilyFit as FamilyFit
from .learn import FinetuneConfig as FinetuneConfig
from .learn import FinetuneResult as FinetuneResult
from .learn import IdentifyResult as IdentifyResult
from .learn import LabFit as LabFit
from .learn import LabFitConfig as LabFitConfig
from .learn import LocalDistilConfig as LocalDistilConfig
from .learn import PairScores as PairScores
from .learn import PretrainConfig as PretrainConfig
from .learn import PretrainResult as PretrainResult
from .learn import StrikePredictive as StrikePredictive
from .learn import distil_locally as distil_locally
from .learn import finetune as finetune
from .learn import finetune_on_tracks as finetune_on_tracks
from .learn import finetune_pair as finetune_pair
from .learn import fit_families as fit_families
from .learn import fit_recording as fit_recording
from .learn import identify as identify
from .learn import identify_pair as identify_pair
from .learn import pair_scores as pair_scores
from .learn import pretrain as pretrain
from .learn import pretrain_pair as pretrain_pair
from .optimize import MBOConfig as MBOConfig
from .optimize import MBOResult as MBOResult
from .optimize import identify_from_rest as identify_from_rest
from .optimize import optimize_strike as optimize_strike
from .optimize import optimize_strikes as optimize_strikes
from .scenes import SHAPES as SHAPES
from .scenes import AbstractImpactScene as AbstractImpactScene
from .scenes import PairScene as PairScene
from .scenes import SolverSettings as SolverSettings
from .scenes import StrikeEvent as StrikeEvent
from .scenes import StrikeScene as StrikeScene
from .scenes import TossEvent as TossEvent
from .scenes import TossScene as TossScene
from .scenes import cube_space as cube_space
from .scenes import impact_geometry as impact_geometry
from .scenes import load_scene as load_scene
from .scenes import make_scene as make_scene
from .scenes import make_strike_scene as make_strike_scene
from .scenes import make_toss_scene as make_toss_scene
from .scenes import simulate_strike as simulate_strike
from .scenes import simulate_strikes_c as simulate_strikes_c
from .scenes import simulate_toss as simulate_toss
from .scenes import simulate_tosses_c as simulate_tosses_c
from .scenes import strike_space as strike_space
from .surrogate import CubeSurrogate as CubeSurrogate
from .surrogate import PairSurrogate as PairSurrogate
from .surrogate import StrikeSurrogate as StrikeSurrogate
from .surrogate import load_cube_surrogate as load_cube_surrogate
from .surrogate import load_pair_surrogate as load_pair_surrogate
from .surrogate import load_strike_surrogate as load_strike_surrogate
from .surrogate import load_surrogate as load_surrogate
from .surrogate import make_pair_surrogate as make_pair_surrogate
from .surrogate import make_strike_surrogate as make_strike_surrogate
from .surrogate import predict as predict
from .surrogate import save_pair_surrogate as save_pair_surrogate
from .surrogate import save_strike_surrogate as save_strike_surrogate
from .surrogate import save_surrogate as save_surrogate
from .surrogate import shipped_cube_surrogate as shipped_cube_surrogate
from .surrogate import shipped_strike_surrogate as shipped_strike_surrogate
from .workflows import CubeTossConfig as CubeTossConfig
from .workflows import CubeTossResult as CubeTossResult
from .workflows import run_cube_toss as run_cube_toss

__all__ = [
    "ParameterError",
    "ParamSpace",
    "EventFileError",
    "Events",
    "GenerateConfig",
    "GenerateResult",
    "alpha_accuracy",
    "alpha_curve",
    "data_path",
    "generate",
    "ingest_cube_tosses",
    "ingest_strike_file",
    "lab_recording",
    "load_events",
    "relative_error",
    "save_events",
    "track_label_sigma",
    "HybridState",
    "HybridSystem",
    "Query",
    "Rollouts",
    "StrikeHybrid",
    "StrikeHybridResult",
    "TossFrames",
    "full_rollouts_c",
    "hybrid_step",
    "hybrid_system",
    "hybrid_toss",
    "hybrid_toss_every",
    "hybrid_tosses",
    "hybrid_track",
    "init_state",
    "make_strike_hybrid",
    "rollouts",
    "rollouts_c",
    "strike_rollout",
    "strike_rollouts",
    "strike_rollouts_c",
    "track_loss",
    "DistilResult",
    "FamilyFit",
    "StrikePredictive",
    "FinetuneConfig",
    "FinetuneResult",
    "IdentifyResult",
    "LabFit",
    "LabFitConfig",
    "LocalDistilConfig",
    "PairScores",
    "PretrainConfig",
    "PretrainResult",
    "distil_locally",
    "finetune",
    "finetune_on_tracks",
    "finetune_pair",
    "fit_families",
    "fit_recording",
    "identify",
    "identify_pair",
    "pair_scores",
    "pretrain",
    "pretrain_pair",
    "MBOConfig",
    "MBOResult",
    "identify_from_rest",
    "optimize_strike",
    "optimize_strikes",
    "SHAPES",
    "AbstractImpactScene",
    "PairScene",
    "SolverSettings",
    "StrikeEvent",
    "StrikeScene",
    "TossEvent",
    "TossScene",
    "cube_space",
    "impact_geometry",
    "load_scene",
    "make_scene",
    "make_strike_scene",
    "make_toss_scene",
    "simulate_strike",
    "simulate_strikes_c",
    "simulate_toss",
    "simulate_tosses_c",
    "strike_space",
    "CubeSurrogate",
    "PairSurrogate",
    "StrikeSurrogate",
    "load_cube_surrogate",
    "load_pair_surrogate",
    "load_strike_surrogate",
    "load_surrogate",
    "make_pair_surrogate",
    "make_strike_surrogate",
    "predict",
    "save_pair_surrogate",
    "save_strike_surrogate",
    "save_surrogate",
    "shipped_cube_surrogate",
    "shipped_strike_surrogate",
    "CubeTossConfig",
    "CubeTossResult",
    "run_cube_toss",
]

__version__ = "0.1.0"
