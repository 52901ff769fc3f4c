"""The hybrid simulator: the surrogate inside MJX's step (and MuJoCo C's), recorded-track predictions and slides."""

from ._cube_rollout import EveryImpactStats as EveryImpactStats
from ._cube_rollout import hybrid_toss as hybrid_toss
from ._cube_rollout import hybrid_toss_every as hybrid_toss_every
from ._cube_rollout import hybrid_tosses as hybrid_tosses
from ._hybrid import HybridResult as HybridResult
from ._hybrid import HybridSim as HybridSim
from ._hybrid import HybridState as HybridState
from ._hybrid import hybrid_rollout as hybrid_rollout
from ._hybrid import hybrid_rollouts as hybrid_rollouts
from ._hybrid import hybrid_rollouts_c as hybrid_rollouts_c
from ._hybrid import hybrid_step as hybrid_step
from ._hybrid import make_hybrid_sim as make_hybrid_sim
from ._pair_hybrid import PairState as PairState
from ._pair_hybrid import PairSystem as PairSystem
from ._pair_hybrid import full_rollouts_c as full_rollouts_c
from ._pair_hybrid import hybrid_pair_step as hybrid_pair_step
from ._pair_hybrid import init_pair_state as init_pair_state
from ._pair_hybrid import pair_rollouts as pair_rollouts
from ._pair_hybrid import pair_rollouts_c as pair_rollouts_c
from ._pair_hybrid import pair_system as pair_system
from ._track_mjx import Query as Query
from ._track_mjx import hybrid_track as hybrid_track
from ._track_mjx import track_loss as track_loss
