"""The control plane explored by simulation: `SimCluster` (the port in memory, on a virtual clock) and the
explorer that runs seeded fault schedules on it (docs/ray.md, "The simulation")."""
