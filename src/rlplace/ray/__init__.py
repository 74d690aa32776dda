"""Realising a plan on Ray: node labels, live inventory, placement groups, actor launch, tear-down.

This package imports Ray; nothing outside it (and `rlplace.connect`, lazily) does, so `import rlplace`
and the offline planner stay fast and Ray-free. Modules: `labels` (label keys, pure), `auth` (Ray's token
authentication: where the token is, who gets in), `cluster` (joining, live inventory), `reserve` and
`diagnose` (placement groups that never hang), `launch` (one actor), `group` (WorkerGroup), `worker` (what a
worker knows about itself), `job` (Job and `connect`).
"""
