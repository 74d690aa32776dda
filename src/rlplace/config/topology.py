"""`cluster.topology` (both dialects) -> `JobSpec.topology`: the levels of the cluster's topology and their labels.

The section schema (`sections.TOPOLOGY_SECTION`) checks the level names (an unknown one is an error with a
did-you-mean) and the label keys. A level left out keeps its default keys; a level written `null` is dropped
(the plan is topology-blind there); a written level is marked, so that the planner warns when no node carries
its label. Whether the inventory's nodes carry the labels is the planner's to say (`planner.topology`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from rlplace.config.fields import INVALID, written
from rlplace.config.problems import Path, Reporter, format_path
from rlplace.model import DEFAULT_TOPOLOGY, JobSpec


def apply(spec: JobSpec, cluster: Mapping[str, object], base: Path, rep: Reporter) -> JobSpec:
    """`spec` with the levels `cluster.topology` writes (problems were reported by the schema)."""
    section = written(cluster, "topology")
    if not isinstance(section, Mapping):
        return spec
    levels = []
    for level in DEFAULT_TOPOLOGY:
        if level.name not in section:
            levels.append(level)
            continue
        keys = section[level.name]
        if keys is None or keys is INVALID:
            continue
        path: Path = (*base, "topology", level.name)
        file, line = rep.where(path)
        levels.append(
            dataclasses.replace(level, labels=keys, written=True, path=format_path(path), file=file, line=line)
        )
    return dataclasses.replace(spec, topology=tuple(levels))
