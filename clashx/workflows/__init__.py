"""The edges: the CLI, the demo, file-level jobs, end-to-end pipelines and plots."""

from ._cube_pipeline import CubeTossConfig as CubeTossConfig
from ._cube_pipeline import run_cube_toss as run_cube_toss
