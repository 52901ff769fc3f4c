"""Sequential pushing (CLASH Table VII): the task, a brax environment on a tabulated simulator, PPO policies, a planner."""

from ._env import PushEnv as PushEnv
from ._env import Task as Task
from ._planner import PlannerConfig as PlannerConfig
from ._planner import plan_strike as plan_strike
from ._response import StrikeTable as StrikeTable
from ._response import build_table as build_table
from ._response import exact_response as exact_response
from ._response import lookup as lookup
from ._response import param_draws as param_draws
from ._response import simulator as simulator
from ._routes import Route as Route
from ._routes import advance as advance
from ._routes import evaluation_yaws as evaluation_yaws
from ._routes import route as route
from ._routes import table_vii as table_vii
from ._train import Policy as Policy
from ._train import PPOConfig as PPOConfig
from ._train import load_policy as load_policy
from ._train import save_policy as save_policy
from ._train import train_policy as train_policy
