"""The Ray-layer tests ship their worker and plan modules to the workers by value."""

from __future__ import annotations

import ray_plans
import ray_workers
from ray import cloudpickle

# The test-only modules are not importable in worker processes (tests/ray is not on their path): ship
# their code with the pickled classes instead.
cloudpickle.register_pickle_by_value(ray_workers)
cloudpickle.register_pickle_by_value(ray_plans)
