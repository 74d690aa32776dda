"""Loading cluster configs of both spec dialects into `rlplace.model.JobSpec` (see docs/config.md).

`load(source)` accepts a YAML file path, YAML text, a dict or an OmegaConf DictConfig and raises one
`ConfigError` listing every problem, each with file, line, key path, value and what would be valid.
"""

from rlplace.config.loader import load
from rlplace.config.sections import config_schema

__all__ = ["config_schema", "load"]
