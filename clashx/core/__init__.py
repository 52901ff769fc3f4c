"""Shared foundations: array types, parameter spaces, the MuJoCo C batch helper, MJX import, engine choice, model-folder I/O, sharding."""

from ._params import ParamSpace as ParamSpace
from ._params import Target as Target
from ._shard import batch_mesh as batch_mesh
from ._shard import map_batched as map_batched
from ._shard import shard_batch as shard_batch
