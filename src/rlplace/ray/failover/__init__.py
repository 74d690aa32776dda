"""Failover: what a running job does when a node is lost or drained, and every change of its ranks.

`rules` holds the node-loss rules on plain data (which node may take a lost rank over, what to say when none
did); `watcher` the `NodeWatcher`, which reads node health, decides and records events; `mover` the
`RankMover`, which acts: drops, moves, shrinks and grows ranks (and `job.resize`). The watcher asks the mover
through its `Mover` protocol, so neither imports the other (docs/ray.md, "How the pieces fit").
"""
