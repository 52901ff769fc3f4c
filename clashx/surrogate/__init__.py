"""The learned impact handlers: the parameter-conditioned strike and cube surrogates, their save/load."""

from ._cube import CubeSurrogate as CubeSurrogate
from ._cube import load_cube_surrogate as load_cube_surrogate
from ._cube import shipped_cube_surrogate as shipped_cube_surrogate
from ._pair import PairSurrogate as PairSurrogate
from ._pair import load_pair_surrogate as load_pair_surrogate
from ._pair import make_pair_surrogate as make_pair_surrogate
from ._pair import save_pair_surrogate as save_pair_surrogate
from ._surrogate import Surrogate as Surrogate
from ._surrogate import load_surrogate as load_surrogate
from ._surrogate import make_surrogate as make_surrogate
from ._surrogate import predict as predict
from ._surrogate import save_surrogate as save_surrogate
from ._surrogate import shipped_surrogate as shipped_surrogate
