"""The hybrid simulator: the surrogate inside MJX's step (and MuJoCo C's), recorded-track predictions and slides."""

from ._rule import Handler as Handler
from ._rule import HybridState as HybridState
from ._rule import HybridSystem as HybridSystem
from ._rule import RuleState as RuleState
from ._rule import full_rollouts_c as full_rollouts_c
from ._rule import hybrid_step as hybrid_step
from ._rule import hybrid_system as hybrid_system
from ._rule import init_state as init_state
from ._rule import observe as observe
from ._rule import rollouts as rollouts
from ._rule import rollouts_c as rollouts_c
from ._strike_rollouts import DT_AFTER as DT_AFTER
from ._strike_rollouts import HybridResult as HybridResult
from ._strike_rollouts import HybridSim as HybridSim
from ._strike_rollouts import hybrid_rollout as hybrid_rollout
from ._strike_rollouts import hybrid_rollouts as hybrid_rollouts
from ._strike_rollouts import hybrid_rollouts_c as hybrid_rollouts_c
from ._strike_rollouts import make_hybrid_sim as make_hybrid_sim
from ._toss_rollouts import hybrid_toss as hybrid_toss
from ._toss_rollouts import hybrid_toss_every as hybrid_toss_every
from ._toss_rollouts import hybrid_tosses as hybrid_tosses
from ._toss_rollouts import rest_rollout as rest_rollout
from ._track_mjx import Query as Query
from ._track_mjx import hybrid_track as hybrid_track
from ._track_mjx import track_loss as track_loss
