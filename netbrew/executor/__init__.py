"""Running nets: the Workspace, the runtimes and the Predictor."""

from netbrew.executor.placement import Placement, plan_placement
from netbrew.executor.predictor import Predictor
from netbrew.executor.runtime import RUNTIMES, create_runtime
from netbrew.executor.threads import get_num_threads, num_threads, set_num_threads
from netbrew.executor.workspace import Workspace

__all__ = [
    "Placement",
    "RUNTIMES",
    "Predictor",
    "Workspace",
    "create_runtime",
    "get_num_threads",
    "num_threads",
    "plan_placement",
    "set_num_threads",
]
