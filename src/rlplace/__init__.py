"""rlplace: place and run the workers of distributed RL jobs on Ray clusters, from one YAML section."""

from rlplace.errors import ConfigError, PlacementError, PlanError, Problem, RlplaceError

__version__ = "0.1.0"

__all__ = ["ConfigError", "PlacementError", "PlanError", "Problem", "RlplaceError", "__version__"]
