"""CLASH steps 1-3: pretraining (distil), identification, fine-tuning, local re-distillation, the whole fit from a recording."""

from ._cube_learn import cube_pretrain_config as cube_pretrain_config
from ._cube_learn import finetune_cube as finetune_cube
from ._cube_learn import identify_cube as identify_cube
from ._cube_learn import pretrain_cube as pretrain_cube
from ._distil import LocalDistilConfig as LocalDistilConfig
from ._distil import distil_locally as distil_locally
from ._finetune import FinetuneConfig as FinetuneConfig
from ._finetune import finetune as finetune
from ._identify import IdentifyResult as IdentifyResult
from ._identify import identify as identify
from ._lab_fit import LabFit as LabFit
from ._lab_fit import LabFitConfig as LabFitConfig
from ._lab_fit import fit_recording as fit_recording
from ._lab_fit import strike_predictive as strike_predictive
from ._pair_learn import finetune_pair as finetune_pair
from ._pair_learn import identify_pair as identify_pair
from ._pair_learn import load_pair_events as load_pair_events
from ._pair_learn import pair_features as pair_features
from ._pair_learn import pair_scores as pair_scores
from ._pair_learn import predict_pair as predict_pair
from ._pair_learn import pretrain_pair as pretrain_pair
from ._predictive import predictive as predictive
from ._predictive import predictive_calibration as predictive_calibration
from ._pretrain import PretrainConfig as PretrainConfig
from ._pretrain import pretrain as pretrain
from ._track_finetune import finetune_on_tracks as finetune_on_tracks
