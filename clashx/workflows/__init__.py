"""The edges: the CLI, the demo, file-level jobs, end-to-end pipelines and plots."""

from ._cube_pipeline import METHODS as METHODS
from ._cube_pipeline import CubeTossConfig as CubeTossConfig
from ._cube_pipeline import CubeTossResult as CubeTossResult
from ._cube_pipeline import run_cube_toss as run_cube_toss
from ._cube_pipeline import save_json as save_json
from ._cube_pipeline import summary_table as summary_table
from ._next_strikes import CHECKPOINTS as CHECKPOINTS
from ._next_strikes import concat_recordings as concat_recordings
from ._next_strikes import slice_recording as slice_recording
from ._next_strikes import strike_loop as strike_loop
from ._pair_workflow import full_contact_bounces as full_contact_bounces
from ._plots import plot_alpha_curves as plot_alpha_curves
from ._plots import plot_tosses as plot_tosses
from ._plots import plot_tracks as plot_tracks
from ._push_cmd import plot_curve as plot_curve
from ._push_cmd import tabulate as tabulate
from ._strike_compare import ALL_METHODS as ALL_METHODS
from ._strike_compare import CompareConfig as CompareConfig
from ._strike_compare import compare as compare
from ._strike_compare import lab_truth as lab_truth
from ._strike_compare import table as table
from ._strike_compare import track_comparison as track_comparison
