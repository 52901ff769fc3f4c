"""Collision events: the file format, generation from simulation, ingestion of lab and real recordings, shipped data, the accuracy metric."""

from ._cube_impacts import generate_bounce_events as generate_bounce_events
from ._data import data_path as data_path
from ._data import lab_recording as lab_recording
from ._events import EventFileError as EventFileError
from ._events import load_events as load_events
from ._events import save_events as save_events
from ._generate import GenerateConfig as GenerateConfig
from ._generate import generate as generate
from ._ingest import ingest_strike_file as ingest_strike_file
from ._ingest_cube import ingest_cube_tosses as ingest_cube_tosses
from ._metrics import alpha_accuracy as alpha_accuracy
from ._metrics import alpha_curve as alpha_curve
from ._metrics import relative_error as relative_error
