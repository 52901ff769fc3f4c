"""The learned impact handlers: the parameter-conditioned strike and cube surrogates, their save/load."""

from ._base import AbstractSurrogate as AbstractSurrogate
from ._cube import CubeSurrogate as CubeSurrogate
from ._cube import impact_targets as impact_targets
from ._cube import load_cube_surrogate as load_cube_surrogate
from ._cube import make_cube_surrogate as make_cube_surrogate
from ._cube import save_cube_surrogate as save_cube_surrogate
from ._cube import shipped_cube_surrogate as shipped_cube_surrogate
from ._pair import PairSurrogate as PairSurrogate
from ._pair import load_pair_surrogate as load_pair_surrogate
from ._pair import make_pair_surrogate as make_pair_surrogate
from ._pair import save_pair_surrogate as save_pair_surrogate
from ._strike_surrogate import StrikeSurrogate as StrikeSurrogate
from ._strike_surrogate import load_or_shipped as load_or_shipped
from ._strike_surrogate import load_strike_surrogate as load_strike_surrogate
from ._strike_surrogate import make_strike_surrogate as make_strike_surrogate
from ._strike_surrogate import mirror as mirror
from ._strike_surrogate import predict as predict
from ._strike_surrogate import release_loss as release_loss
from ._strike_surrogate import save_strike_surrogate as save_strike_surrogate
from ._strike_surrogate import shipped_strike_surrogate as shipped_strike_surrogate
from ._strike_surrogate import surrogate_family as surrogate_family
from ._strike_surrogate import velocity_loss as velocity_loss
from ._strike_surrogate import window_displacement as window_displacement
