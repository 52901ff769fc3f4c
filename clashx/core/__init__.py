"""Shared foundations: array types, parameter spaces, the MuJoCo C batch helper, MJX import, engine choice, the batching policy, model-folder I/O, sharding."""

from . import _batch as batch  # noqa: F401  (a namespace: clashx.core.batch)
from ._batching import block_override as block_override
from ._batching import block_size as block_size
from ._batching import in_blocks as in_blocks
from ._batching import model_world_bytes as model_world_bytes
from ._batching import world_bytes as world_bytes
from ._checks import check_finite_model as check_finite_model
from ._checks import check_outputs_apart as check_outputs_apart
from ._checks import check_seed as check_seed
from ._checks import command_line as command_line
from ._checks import event_weights as event_weights
from ._checks import nonfinite_leaves as nonfinite_leaves
from ._checks import output_lock as output_lock
from ._checks import same_path as same_path
from ._engine import on_host as on_host
from ._engine import resolve_engine as resolve_engine
from ._io import check_output as check_output
from ._io import check_space as check_space
from ._io import describe_changes as describe_changes
from ._io import load_model_leaves as load_model_leaves
from ._io import read_model_meta as read_model_meta
from ._io import save_model as save_model
from ._io import write_json as write_json
from ._io import write_text as write_text
from ._lm import levenberg_marquardt as levenberg_marquardt
from ._mjx import _solver as mjx_solver  # noqa: F401  (MJX's constraint solver module: grad patches its loop)
from ._mjx import as_float64 as as_float64
from ._mjx import mjx as mjx
from ._params import Layout as Layout
from ._params import ParamSpace as ParamSpace
from ._params import Target as Target
from ._shard import batch_mesh as batch_mesh
from ._shard import constrain_batch as constrain_batch
from ._shard import map_batched as map_batched
from ._shard import shard_batch as shard_batch
from ._shard import spread as spread
from ._types import Array as Array
from ._types import Bool as Bool
from ._types import Float as Float
from ._types import Int as Int
from ._types import PRNGKeyArray as PRNGKeyArray
from ._types import ScalarLike as ScalarLike
