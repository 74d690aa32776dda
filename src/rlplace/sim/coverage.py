"""Which branches of the control plane (`rlplace.ray`) and of the simulation (`rlplace.sim`) a run of the explorer ran
(`scripts/explore.py --coverage`, docs/ray.md "The simulation"): every branch is run at least once per 10,000
schedules, or listed below with why the simulation cannot run it.

Measured with coverage.py (a dev dependency: `pip install -e '.[dev]'`), branch coverage, in every process of the
run. The report lists, per module, the functions with lines or branches not run, each with the reason from
`NOT_SIMULATED` when there is one, and says how many are left unexplained. Its head line counts as the list does:
the statements a module runs when imported (definitions, constants: imported before recording began) count as
run, over every module of `rlplace.ray` and `rlplace.sim`, those not simulated included.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: What the simulation cannot run, and why: a module (its path under src/rlplace) or one of its functions
#: ("module.py:function", `Class.method` for a method).
NOT_SIMULATED: dict[str, str] = {
    "ray/ray_port.py": "RayCluster: the port answered by Ray (tests/ray run it)",
    "sim/mutations.py": "runs only under `--mutate` (tests/sim/test_explorer.py injects each, "
    "`scripts/explore.py --mutate all` too)",
    "sim/coverage.py": "the report itself, made after the schedules, outside the recording "
    "(tests/sim/test_coverage_report.py)",
    "ray/_compat.py": "Ray's private API, under RayCluster only",
    "ray/local_raylets.py": "starts raylets of a real Ray cluster (`rlplace demo`, the Ray tests)",
    "ray/join.py": "joins a real Ray cluster (`ray start`, `ray.init`)",
    "ray/auth.py": "Ray's token authentication (commands, `rlplace run`)",
    "ray/token_file.py": "Ray's token file (commands)",
    "ray/worker.py": "the worker side of Ray (its runtime context); the simulation stands in for `install`, "
    "`restarted` and `cluster` inside each actor",
    "ray/interpreter.py": "probes a Python interpreter on a node: the simulated nodes run this process's",
    "ray/job.py:connect": "plans and joins a real cluster (`rlplace.connect`): the simulation builds its Job",
    "ray/job.py:_join": "joins a real cluster",
    "ray/nodes.py:live_inventory": "reads a real cluster",
    # The command line's, not the control plane's: tested where they run.
    "ray/handoff.py": "`rlplace run` hands its plan to the script it runs (tests/ray/test_run_handoff.py, "
    "tests/test_run_shows.py)",
    "ray/interrupt.py": "Ctrl-C in a real driver process, set up by `connect` (tests/test_cli_run.py, its exit 130)",
    "ray/machine.py": "the limits of this machine for `rlplace demo`'s local raylets (tests/test_run_shows.py)",
    "ray/job.py:_spec": "of `connect` (not simulated): reads the config it is given",
    "ray/job.py:_export": "of `connect` (not simulated): the plan handed to `rlplace run`",
    "ray/job.py:_command_line": "of `connect` (not simulated)",
    "ray/job.py:Job.phases": "the phase engine (offload hooks) of the runtime: tests/runtime/test_runtime_on_ray.py",
    "ray/job.py:Job.phase": "the phase engine (offload hooks) of the runtime: tests/runtime/test_runtime_on_ray.py",
    "ray/job.py:Job.record_memory": "the workers' CUDA peak for `rlplace run --profile-out` "
    "(tests/test_cli_profile_out.py)",
    "ray/job.py:Job.verify": "asks each worker `worker_placement()`, which reads Ray's runtime context inside it "
    "(ray/worker.py, not simulated; tests/ray/test_ray_failures.py)",
    "ray/group.py:WorkerGroup.placements": "as `Job.verify`: the worker's own `worker_placement()` (ray/worker.py)",
    "ray/group.py:WorkerGroup.placements_async": "as `Job.verify`: the worker's own `worker_placement()`",
    "ray/group.py:_own_placement": "runs inside a real worker: `worker_placement()` (ray/worker.py)",
    "ray/group.py:WorkerGroup.__getstate__": "a group pickled into a worker (a ShardRouter's): the simulation passes "
    "objects by reference, nothing is pickled (tests/runtime/test_runtime_on_ray.py)",
    "ray/group.py:WorkerGroup.__setstate__": "as `__getstate__`: a group unpickled in a worker",
    "ray/group.py:_Untroubled.check": "the health of a group unpickled in a worker (see `__getstate__`)",
    "ray/group.py:_Untroubled.wait_usable": "the health of a group unpickled in a worker (see `__getstate__`)",
    "ray/local_group.py:LocalHandle.__reduce__": "refuses to pickle a driver-local worker into an actor: nothing is "
    "pickled in the simulation (tests/ray/test_ray_local_group.py)",
    "ray/master_ports.py:free_ports": "binds sockets of this machine: on a simulated node "
    "`_ports_on_a_simulated_node` answers for it (tests/runtime/test_rendezvous_parts.py)",
    "ray/master_ports.py:port_range": "reads $RLPLACE_MASTER_PORT_RANGE, which the explorer leaves unset "
    "(tests/runtime/test_rendezvous_parts.py)",
    "ray/status.py:_probe_gpus": "asks each worker for its GPUs and waits for the answers: the explorer reads "
    "status after every move, where no time may pass (`probe_gpus=False`; tests/runtime/test_status.py)",
    "ray/status.py:_gpu_ids": "runs inside a real worker (Ray's GPU ids, ray/worker.py)",
    "ray/status.py:collect": "`rlplace status` on the connected Ray cluster (tests/runtime/test_status.py)",
    "ray/status.py:sizes": "`rlplace status` on the connected Ray cluster (tests/runtime/test_status.py)",
    "ray/labels.py:label_value": "of `rlplace start` (commands/start.py): the simulation labels its nodes itself",
    "ray/labels.py:is_label_value": "of `rlplace start` (commands/start.py)",
    "ray/labels.py:node_env_labels": "of `rlplace start`: a node's environment published as labels "
    "(tests/planner/test_robots_from_env.py)",
    # Failover, groups, launching, reserving, the rendezvous, and the World's own.
    # Ray's client raising or Ray gone: the simulated GCS never refuses a request (it waits while it restarts, as
    # measured on Ray 2.60) and the simulated driver never loses Ray; tests/sim/test_ray_refusing_on_sim.py injects it.
    "ray/failover/mover.py:RankMover._kill": "Ray refusing a kill (of an actor gone already, or with Ray shut down): "
    "the simulated port never refuses (tests/sim/test_ray_refusing_on_sim.py)",
    "ray/job.py:Job._kill_all": "Ray refusing a kill at shutdown: the simulated port never refuses "
    "(tests/sim/test_ray_refusing_on_sim.py)",
    "ray/reserve.py:Reservation._create": "Ray refusing a placement group (malformed bundles, Ray shut down): the "
    "simulated port never refuses (tests/sim/test_ray_refusing_on_sim.py)",
    "ray/reserve.py:Reservation._remove": "Ray refusing to remove a group gone already (Ray shut down): the "
    "simulated port never refuses (tests/sim/test_ray_refusing_on_sim.py)",
    "ray/reserve.py:Reservation._starved": "the actor table (a debugging API) failing while a timeout is explained: "
    "the simulated port never refuses (tests/sim/test_ray_refusing_on_sim.py)",
    "ray/failover/watcher.py:NodeWatcher._run_once": "a look at the nodes that raises (logged, tried again) and Ray "
    "gone under the job (`connected()` false): the simulated port neither raises nor disconnects "
    "(tests/sim/test_ray_refusing_on_sim.py)",
    "ray/failover/watcher.py:NodeWatcher._leave": "the look at a draining node's answers raising (Ray refusing "
    "`wait`): the simulated port never refuses (tests/sim/test_ray_refusing_on_sim.py)",
    "ray/job.py:Job.shutdown": "`rlplace run --profile-out`'s memory figures at shutdown (`record_memory`, the "
    "workers' CUDA: tests/test_cli_profile_out.py) and a driver whose Ray was shut down first "
    "(tests/sim/test_ray_refusing_on_sim.py)",
    # What only a user's code does: the explorer's moves are the control plane's and a user's calls through groups.
    "ray/group.py:WorkerGroup.__repr__": "a group printed by the user (tests/sim/test_group_on_sim.py)",
    "ray/group.py:WorkerGroup._actor": "a rank out of range (IndexError naming the ranks): the explorer's moves "
    "take ranks modulo the size (tests/sim/test_group_on_sim.py)",
    "ray/group.py:WorkerGroup._rerun": "a ref the user made outside the group, re-run after a takeover (NodeLostError):"
    " the explorer's calls go through the group (tests/sim/test_group_on_sim.py)",
    "ray/group.py:WorkerGroup._send": "`__ray_call__` (a function run on each worker): `placements()` and "
    "`record_memory()` send it, not simulated (they read the worker's runtime context and CUDA; "
    "tests/sim/test_group_on_sim.py runs one)",
    "ray/group.py:WorkerGroup.actor_ids": "read by the runtime (weight sync's routes, the buffer's shards: "
    "runtime/sync.py, runtime/buffer.py), not by the control plane (tests/sim/test_sync_on_sim.py)",
    "ray/group.py:WorkerGroup.kill": "a kill without restart that Ray does not carry out in time: the explorer's "
    "kills of workers ask Ray to restart them (`restart_worker`; tests/sim/test_group_on_sim.py)",
    "ray/failover/mover.py:RankMover.grow_back": "a job started from a Plan without its config (it cannot grow "
    "back): the explorer's jobs carry their config, which its resizes need (tests/sim/test_group_on_sim.py)",
    "ray/rendezvous.py:Rendezvous._warn_overrides": "a node group's env_configs setting a rendezvous variable "
    "(MASTER_PORT ...): the generated configs set none (tests/sim/test_group_on_sim.py)",
    "ray/launch.py:launch_ray_actor": "RLightning's one-worker launch, beside `job.launch`: no WorkerGroup holds its "
    "workers, the explorer's invariants are the groups' (tests/ray/test_ray_launch_options.py)",
    "ray/launch.py:Launcher.check_interpreters": "workers with an interpreter of their own (`python_interpreter_path`"
    "), probed on their node (ray/interpreter.py, not simulated; tests/ray/test_ray_launch_options.py)",
    "ray/launch.py:_runtime_env": "a worker's own interpreter (`py_executable`): probed on a real node "
    "(ray/interpreter.py, not simulated; tests/ray/test_ray_launch_options.py)",
    "ray/launch.py:actor_options": "what a user passes to `launch` (`options=`, `max_task_retries=`), a spanning "
    "worker's fractions of several GPUs (tests/sim/test_launch_on_sim.py), accelerators other than GPUs (by "
    "resource name): the explorer's launches pass none and its nodes have GPUs (tests/ray/test_ray_launch_options.py, "
    "tests/ray/test_ray_accelerators.py)",
    "ray/launch.py:Launcher.check_names": "another job's actors under the same names in one Ray namespace: the "
    "explorer's second job has a namespace of its own (tests/ray/test_ray_failures.py)",
    "ray/launch.py:apply_resize": "a worker class without `on_resized`: the explorer's SimWorker has one, so every "
    "resize is seen told (tests/ray/test_ray_resize.py)",
    "ray/rendezvous.py:Rendezvous._allocate": "a master on the driver's own node, its port bound in this process "
    "(master_ports.free_ports, this machine's sockets): the simulated driver runs on no simulated node "
    "(tests/runtime/test_rendezvous_on_ray.py)",
    "ray/rendezvous.py:Rendezvous._choose_masters": "a clash left after three fresh draws: each draw avoids every port "
    "the live records hold, so only another driver choosing the same port between a draw and its check, three times "
    "over; on the simulation's one thread no driver runs between them",
    "ray/rendezvous.py:Rendezvous._ensure_masters": "a rank 0 whose node has no address: Ray's node records always "
    "carry one (the simulation's too); the check names the node should one appear",
    "ray/rendezvous.py:Rendezvous.renew": "as `_ensure_masters`: a rank 0 whose node has no address",
    "ray/failover/watcher.py:NodeWatcher._wake": "the watcher not started (nothing pinned to a node): no loss is "
    "declared then (only pinned ranks are lost), so nothing wakes it",
    "ray/failover/watcher.py:NodeWatcher._declare": "a rank taken over by another thread between the probe that "
    "found its node lost and the declaration's lock (the simulation's locks never wait: one thread), and "
    "`replace_within_s=0` (the explorer's jobs have a 3 s window: tests/sim/test_failover_on_sim.py, "
    "test_replace_within_zero_...)",
    "ray/failover/rules.py:_waited_for": "`replace_within_s=0`: the explorer's jobs have a 3 s window "
    "(tests/sim/test_failover_on_sim.py, test_replace_within_zero_...)",
    "ray/failover/mover.py:RankMover._realise": "a resize failing with an error other than PlacementError or "
    "PlanError (Ray's client raising, wrapped into a PlacementError; Ctrl-C, kept): the simulated port never "
    "refuses (tests/sim/test_ray_refusing_on_sim.py injects both)",
    "ray/failover/mover.py:RankMover._retell": "a component whose master moved but has no group: its launch failed "
    "after its master was chosen (the payload comes first), then its rank 0's node was taken over; or one in the "
    "driver, which has no master: both left out, as they must be",
    "ray/failover/watcher.py:NodeWatcher._drained": "the rank's health or the job changed between the tick's look and "
    "this lock: on Ray another thread (a call's probe, a shutdown); in the simulation only a shutdown "
    "(`stop_during`) coming due inside the same tick's declarations, not met in 10,000 schedules (run seeds 2 and "
    "3); and Ray refusing the no-op sent to the draining rank's workers: the simulated port never refuses "
    "(tests/sim/test_ray_refusing_on_sim.py)",
    "ray/reserve.py:Reservation._wait": "a group removed while its reservation waits for it: a shutdown from "
    "another thread (`stop_during`) landing in that wait, not met in 10,000 schedules (run seeds 2 and 3: a spare is "
    "taken only with its resources free, so its group is placed at once); tests/sim/test_group_on_sim.py, "
    "test_a_shutdown_from_another_thread_while_a_growth_waits_... runs it",
    "ray/reserve.py:Reservation._wait_fillers": "two nodes' idle GPUs held aside in one reservation, one filler "
    "placed and the other not when the wait ran out: the explorer's second job starts after the first's reservation",
    "sim/world.py:World._drained": "a drain not moved yet, checked while the GCS is still down: a GCS restart drawn "
    "after a drain and before its takeover, the check landing inside the outage; some 10,000-schedule runs meet it "
    "(run seed 2), not all (seed 3); tests/sim/test_explorer.py, test_a_drain_the_gcs_keeps_from_the_job_past_its_"
    "deadline_... runs it every time",
    "sim/world.py:World._calm": "a worker Ray placed on a node down or draining while the job's own nodes are fine "
    "(a drained rank's node after its takeover, with Ray's worker still on it): not met in 10,000 schedules "
    "(run seeds 2 and 3)",
    "sim/world.py:World._hang": "two of the job's nodes draining when a call hangs (their waits nest on the "
    "simulation's one thread: tests/sim/test_explorer.py, test_two_drains_waiting_on_hung_calls_...)",
    "sim/world.py:World._status": "a worker of the state without an actor of the simulation, or on no node: "
    "`_ranks`, checked first, holds that every worker has its actor, and every pinned rank a node",
    "sim/generate.py:planned": "fifty drawn configs in a row that do not plan on one cluster (or plan no worker): "
    "not met on clusters of 2 to 4,096 nodes; the schedule then runs an example (tests/sim/test_explorer.py)",
    "sim/world.py:Move.__str__": "names a move in a violation's message and `--replay`'s listing "
    "(tests/sim/test_explorer.py)",
    "sim/world.py:first": "names the error in a violation's message (tests/sim/test_explorer.py)",
    "sim/world.py:World._replacement": "asked only of a rank still failed at `settle`, when no spare is ready: true "
    "is a broken promise, false only when another job holds part of the node with its label "
    "(tests/sim/test_explorer.py, test_a_replacement_another_job_holds_part_of_...)",
    # ray/'s reading of the cluster and of the user's code (nodes, topology, status, records, state, gate, calls,
    # exchange, labels, local_group, master_ports), and the simulation's own (sim/memory_port.py, sim/explore.py).
    "ray/calls.py:CallMemory.remember": "forgets the oldest of more than REMEMBERED (4,096) calls remembered per "
    "group: a schedule of at most 30 moves sends a few hundred (tests/ray/test_group_parts.py)",
    "ray/exchange.py:_node_rank_from_record": "a worker Ray places on an unranked node (a hot spare) that finds no job "
    "record: it starts after a shutdown deleted it, its kill still on the way; the explorer has not drawn the three "
    "at once (tests/sim/test_records_on_sim.py)",
    "ray/exchange.py:_wait_for_peers": "a rank of a component Ray places missing at the rendezvous for its timeout "
    "(120 s, the driver's $RLPLACE_RENDEZVOUS_TIMEOUT_S): a schedule ends sooner after such a start "
    "(tests/sim/test_placed_by_ray_on_sim.py). Shortened to 15 s it runs, and breaks 'ranks 0..n-1': docs/decisions.md",
    "ray/gate.py:ResizeGate.pause": "waits while another thread sends calls: the simulation runs one thread, where a "
    "send never waits, so a resize never meets one under way (tests/ray/test_group_parts.py)",
    "ray/gate.py:ResizeGate.open": "waits while another thread resizes: the simulation runs one thread "
    "(tests/ray/test_group_parts.py)",
    "ray/labels.py:node_env": "reads the variables a node publishes as labels (`rlplace start`'s `node_env_labels`, "
    "not simulated): the simulated nodes publish none (tests/planner/test_robots_from_env.py)",
    "ray/local_group.py:LocalHandle.__repr__": "what the user's REPL or log shows: the control plane formats none "
    "(tests/sim/test_placed_by_ray_on_sim.py)",
    "ray/local_group.py:LocalGroup.__repr__": "what the user's REPL or log shows: the control plane formats none "
    "(tests/sim/test_placed_by_ray_on_sim.py)",
    "ray/local_group.py:LocalGroup.placements": "called by `Job.verify` (not simulated: it asks the workers Ray runs "
    "for `worker_placement()`) and the user's code (tests/sim/test_placed_by_ray_on_sim.py)",
    "ray/local_group.py:LocalGroup.placements_async": "as `LocalGroup.placements`: `Job.verify` and the user's code",
    "ray/local_group.py:LocalGroup._placements": "as `LocalGroup.placements`: `Job.verify` and the user's code",
    "ray/master_ports.py:port_order": "wraps to the range's start once every port from `first` to its end is taken: "
    "on a simulated node nothing listens, and masters hold a handful of its 12,768 ports "
    "(tests/runtime/test_rendezvous_parts.py, tests/sim/test_memory_port.py)",
    "ray/nodes.py:_accelerator": "a node without rlplace's accelerator label (Ray's `accelerator_type:` resource read "
    "instead): the simulated nodes are labelled as `rlplace start` labels them (tests/ray/test_ray_inventory.py)",
    "ray/nodes.py:_by_rank_label": "rank labels that break the rules (some nodes unranked, a rank not a number): the "
    "simulated nodes are ranked as `rlplace start` ranks them (tests/ray/test_ray_inventory.py)",
    "ray/nodes.py:_default_order": "orders a cluster without rank labels: the simulated nodes all carry one "
    "(tests/ray/test_ray_inventory.py)",
    "ray/nodes.py:_ip_key": "an address that is no IP: the simulated nodes' are IPs (tests/ray/test_ray_inventory.py)",
    "ray/nodes.py:is_head": "called by `rlplace drain` only (commands/drain.py), not the control plane "
    "(tests/ray/test_ray_inventory.py)",
    "ray/records.py:JobRecord.node_of": "called by the runtime's collectives only (runtime/collective.py), not the "
    "control plane (tests/runtime/test_rendezvous_parts.py)",
    "ray/records.py:RecordWriter.on_change": "a record that cannot be written: Ray gone under the driver; a GCS "
    "restart blocks requests instead (measured, docs/ray.md), as the simulation's does "
    "(tests/sim/test_records_on_sim.py)",
    "ray/records.py:RecordWriter.write": "a write after the job is shut down: a change on another thread racing the "
    "shutdown, and the simulation runs one thread (tests/sim/test_records_on_sim.py)",
    "ray/records.py:read_all": "a record listed, then empty or gone when read (its driver, another process, deleted it "
    "in between): the simulation's drivers take turns on one thread (tests/sim/test_records_on_sim.py)",
    "ray/state.py:JobState.__init__": "refuses a negative `replace_within_s` (connect's argument): the explorer's jobs "
    "take its own bounds (tests/sim/test_records_on_sim.py)",
    "ray/state.py:JobState.planned": "a component the plan does not hold, named by the user's code (`job.launch`, "
    "`job.resize`): the explorer's moves name planned ones (tests/ray/test_ray_resize.py)",
    "ray/state.py:JobState.worker": "a rank the plan does not hold, asked by the user's code (`job.worker`): the "
    "explorer asks none (tests/ray/test_ray_failures.py)",
    "ray/status.py:_node_rows": "a lost rank whose events fell out of the record's last 50: a schedule of at most 30 "
    "moves makes fewer (tests/sim/test_status_on_sim.py)",
    "ray/status.py:_parse": "an actor named `rlplace:` that is no worker: rlplace names none so (its placement groups "
    "are `rlplace:<job>:...`), only a user could (tests/sim/test_records_on_sim.py)",
    "ray/topology.py:Mismatch.__str__": "a live cluster whose topology labels contradict the plan (one made for "
    "other nodes): the simulated cluster is built from the plan's own inventory (tests/ray/test_topology_rules.py)",
    "ray/topology.py:check_live": "as `Mismatch.__str__`: the simulated cluster is the plan's own inventory",
    "ray/topology.py:mismatches": "as `Mismatch.__str__`: the simulated cluster is the plan's own inventory",
    "ray/topology.py:unplanned": "a plan made blind to a level the live nodes carry: the simulated cluster is the "
    "plan's own inventory (tests/ray/test_topology_rules.py)",
    "ray/topology.py:job_levels": "a Job handed a Plan without its spec (`Job(plan, ...)` by hand): `connect` and the "
    "explorer pass the spec (tests/ray/test_topology_rules.py)",
    "sim/explore.py:cases": "example configs the repository does not have: one that plans no worker, one none of whose "
    "elastic variants plans (it says `elastic` already); the examples are data",
    "sim/explore.py:generated_case": "the fallback for sim/generate.py's `planned` giving up (no config planned in "
    "its 50 draws, which no run of 10,000 schedules has met): `draw` then takes an example",
    "sim/explore.py:schedule": "every one of the 22 weights drawn 0 (one schedule in 5^22): the base weights then, "
    "so that there is something to draw (tests/sim/test_explorer.py)",
    "sim/explore.py:_run": "returns a violation: runs when a schedule breaks an invariant (tests/sim/test_explorer.py "
    "runs every mutation of sim/mutations.py)",
    "sim/explore.py:shrink": "runs after a violation (tests/sim/test_explorer.py)",
    "sim/explore.py:explore": "what follows a violation: shrinking, stopping at the first (tests/sim/test_explorer.py)",
    "sim/memory_port.py:SimActor.instance": "read by the tests, looking inside an actor; the explorer reads its "
    "processes (tests/sim/test_sync_on_sim.py)",
    "sim/memory_port.py:SimActor.payload": "read by the tests, looking inside an actor; the explorer reads its "
    "processes (tests/sim/test_placed_by_ray_on_sim.py)",
    "sim/memory_port.py:SimActor.__getattr__": "a hook the user's class lacks (`hasattr(handle, 'on_replaced')`): the "
    "explorer's SimWorker has every hook (tests/sim/test_memory_port.py)",
    "sim/memory_port.py:SimCluster.gcs_address": "the port's, asked by `connect` and the commands only (not simulated)",
    "sim/memory_port.py:SimCluster.namespace": "the driver's namespace, for a Job without a name: the explorer names "
    "its jobs (tests/sim/test_records_on_sim.py)",
    "sim/memory_port.py:SimCluster.create_group": "Ray's refusal of a bad bundle: rlplace's plans make none "
    "(tests/sim/test_memory_port.py)",
    "sim/memory_port.py:SimCluster.remove_group": "a group removed twice (a no-op, as on Ray): rlplace removes each "
    "group it created once (tests/sim/test_memory_port.py)",
    "sim/memory_port.py:SimCluster.start_actor": "an unnamed actor, or one created in a group not placed yet: "
    "rlplace names every worker and starts it in a group it saw placed, in the same instant "
    "(tests/sim/test_memory_port.py)",
    "sim/memory_port.py:SimCluster._start_in": "an actor created before its group was placed (see `start_actor`)",
    "sim/memory_port.py:SimCluster._place_actor": "an actor pinned to a node dead when it is created: rlplace pins a "
    "worker to a node it found alive, in the same instant (tests/sim/test_memory_port.py)",
    "sim/memory_port.py:SimCluster._candidates": "a node with the rank's label in another rack or domain than the "
    "group selects: the explorer's replacements join where their rank was (tests/sim/test_memory_port.py)",
    "sim/memory_port.py:SimCluster.get": "a get without a timeout that would wait forever: a hang, reported as the "
    "invariant 'never hang'; it runs only when the control plane hangs (tests/sim/test_memory_port.py)",
    "sim/memory_port.py:SimCluster.wait_on": "a wait on the job's state without a timeout and nothing left to happen: "
    "a hang; the watcher, its one caller, always passes a timeout (tests/sim/test_memory_port.py)",
    "sim/memory_port.py:SimCluster._spend": "a move spinning without time passing: a hang, reported as the invariant "
    "'never hang'; it runs only when the control plane spins (tests/sim/test_explorer.py's mutations)",
    "sim/memory_port.py:SimCluster.get_actor": "asked by status's GPU probe only (`_probe_gpus`, not simulated) "
    "(tests/sim/test_memory_port.py)",
    "sim/memory_port.py:SimCluster.cancel": "asked by ray/interpreter.py only (not simulated) "
    "(tests/sim/test_memory_port.py)",
    "sim/memory_port.py:SimCluster.object_nodes": "asked by weight sync only (runtime/sync.py, not the control "
    "plane's moves) (tests/sim/test_sync_on_sim.py)",
    "sim/memory_port.py:SimCluster._once_passed": "a call passed results of other calls: weight sync "
    "(runtime/sync.py) and the user's code pass them, the control plane never "
    "(tests/sim/test_memory_port.py, tests/sim/test_sync_on_sim.py)",
    "sim/memory_port.py:SimCluster._body": "a call passed a result that failed: see `_once_passed` "
    "(tests/sim/test_memory_port.py)",
    "sim/memory_port.py:SimCluster._run_code": "actor code that raises at once: the explorer's SimWorker never raises, "
    "and a bad start fails without running the constructor (tests/sim/test_memory_port.py)",
    "sim/memory_port.py:_Fiber._main": "actor code that waits, then raises: a rendezvous given up (see "
    "`exchange._wait_for_peers`) (tests/sim/test_placed_by_ray_on_sim.py)",
    "sim/memory_port.py:_ports_on_a_simulated_node": "runs out of master ports: on a simulated node nothing listens "
    "(see `port_order`) (tests/sim/test_memory_port.py)",
}


#: Modules whose violation messages (`_violation_lines`) run only when an invariant breaks, and why that is
#: enough: the explorer runs them under each mutation.
VIOLATION_MESSAGES: dict[str, str] = {
    "sim/world.py": "run only when an invariant breaks; `--mutate all` (tests/sim/test_explorer.py runs each "
    "mutation of sim/mutations.py) makes them run",
}


@contextmanager
def recording(folder: str) -> Iterator[None]:
    """Record branch coverage of `rlplace.ray` and `rlplace.sim` into `folder` (one data file per process) while
    the block runs. Modules imported before it count from here on: `report` reads their definitions as run."""
    import coverage

    cov = coverage.Coverage(
        data_file=os.path.join(folder, ".coverage"),
        data_suffix=True,
        branch=True,
        source_pkgs=["rlplace.ray", "rlplace.sim"],
    )
    cov.set_option("run:disable_warnings", ["module-not-measured"])  # imported before: see `report`
    cov.start()
    try:
        yield
    finally:
        cov.stop()
        cov.save()


def report(folder: str, root: Path) -> str:
    """The coverage of the run recorded in `folder`: per module of `rlplace.ray` and `rlplace.sim`, what ran, and
    each function with lines or branches that did not, with why (`NOT_SIMULATED`) or UNEXPLAINED."""
    import coverage

    cov = coverage.Coverage(data_file=os.path.join(folder, ".coverage"), branch=True)
    cov.combine([folder], keep=False)
    out = os.path.join(folder, "coverage.json")
    cov.json_report(outfile=out)
    files = json.loads(Path(out).read_text())["files"]
    src = root / "src" / "rlplace"
    lines, unexplained = [], 0
    totals = {"statements": 0, "missing": 0, "branches": 0, "missing_branches": 0}
    for path in sorted((src / "ray").rglob("*.py")) + sorted((src / "sim").rglob("*.py")):
        name = path.relative_to(src).as_posix()
        data = files.get(str(path)) or files.get(os.path.relpath(path)) or _by_suffix(files, name)
        at_import = _run_at_import(path)  # the processes imported the modules before recording began
        missing = set(data["missing_lines"]) - at_import if data else set()
        branches = [tuple(b) for b in data.get("missing_branches", []) if b[0] not in at_import] if data else []
        summary = data["summary"] if data else {}
        totals["statements"] += summary.get("num_statements", 0)
        totals["missing"] += len(missing)
        totals["branches"] += summary.get("num_branches", 0)
        totals["missing_branches"] += len(branches)
        if name in NOT_SIMULATED:
            lines.append(f"{name}: not simulated: {NOT_SIMULATED[name]}")
            continue
        if not data:
            missing = set(range(1, 1 + len(path.read_text().splitlines()))) - at_import
        violations = _violation_lines(path) if name in VIOLATION_MESSAGES else set()
        explained = {n for n in missing if n in violations}
        missing -= explained
        branches = [(a, b) for a, b in branches if b not in violations]
        gaps = _by_function(path, missing, branches)
        if explained:
            lines.append(f"{name}: {len(explained)} line(s) of violation messages: {VIOLATION_MESSAGES[name]}")
        if not gaps:
            continue
        for function, (missed, arcs) in sorted(gaps.items()):
            why = NOT_SIMULATED.get(f"{name}:{function}")
            if why is None:
                unexplained += 1
            where = ", ".join(str(n) for n in sorted(missed)[:8]) + (" ..." if len(missed) > 8 else "")
            arcs_text = ", ".join(f"{a}->{b}" for a, b in arcs[:6]) + (" ..." if len(arcs) > 6 else "")
            detail = "; ".join(
                x for x in (f"lines {where}" if missed else "", f"branches {arcs_text}" if arcs else "") if x
            )
            lines.append(f"{name}:{function}: {detail}: {why or 'UNEXPLAINED'}")
    percent = 100 * (totals["statements"] - totals["missing"]) / max(1, totals["statements"])
    branch_percent = 100 * (totals["branches"] - totals["missing_branches"]) / max(1, totals["branches"])
    head = (
        f"coverage of rlplace.ray and rlplace.sim: {percent:.1f}% of lines, {branch_percent:.1f}% of branches; "
        f"{unexplained} function(s) with code not run and not explained"
    )
    return "\n".join([head, *lines])


def _by_suffix(files: dict, name: str) -> dict | None:
    return next((d for f, d in files.items() if f.replace(os.sep, "/").endswith("rlplace/" + name)), None)


def _violation_lines(path: Path) -> set[int]:
    """The lines of the statements of `World` that say an invariant broke, with their continuation lines: a
    `return f"..."` (or a plain string, or the message kept from an earlier check: `return self.x`) of an invariant
    (what `_broken` calls, and they in turn), a message kept for the next check (`self.x = f"..."`), and each
    `raise Violation(...)`; and the statements before it in the block of an `if` that ends so (they build the
    message: what the worker had, which calls ran)."""
    tree = ast.parse(path.read_text())
    world = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "World"), None)
    methods = {m.name: m for m in (world.body if world else []) if isinstance(m, ast.FunctionDef)}
    checks, todo = set(), ["_broken"]
    while todo:  # the invariants: what `_broken` calls, and what they call in turn
        name = todo.pop()
        if name in methods and name not in checks:
            checks.add(name)
            todo += [a.attr for a in ast.walk(methods[name]) if isinstance(a, ast.Attribute)]
    returned = [n.value for c in checks for n in ast.walk(methods[c]) if isinstance(n, ast.Return)]
    said_later = {v.attr for v in returned if isinstance(v, ast.Attribute)}  # `return self._stale_port`
    out: set[int] = set()
    for name, method in methods.items():
        for node in ast.walk(method):
            if not isinstance(node, ast.stmt):
                continue
            value = node.value if isinstance(node, ast.Return) else None
            text = isinstance(value, ast.JoinedStr) or (
                isinstance(value, ast.Constant) and isinstance(value.value, str)
            )
            kept_before = isinstance(value, ast.Attribute) and value.attr in said_later
            says = name in checks and (text or kept_before)
            kept = isinstance(node, ast.Assign) and isinstance(node.value, ast.JoinedStr)  # said at the next check
            kept = kept and any(getattr(t, "attr", None) in said_later for t in getattr(node, "targets", []))
            exc = node.exc if isinstance(node, ast.Raise) else None
            raises = isinstance(exc, ast.Call) and getattr(exc.func, "id", "") == "Violation"
            if says or kept or raises:
                out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    for method in methods.values():
        for node in ast.walk(method):
            if isinstance(node, ast.If) and node.body[-1].lineno in out:
                out.update(range(node.body[0].lineno, node.body[-1].lineno))
    return out


def _run_at_import(path: Path) -> set[int]:
    """The lines of the statements a module runs when imported: its own and its classes' (definitions, decorators,
    constants), not those inside functions."""
    lines: set[int] = set()

    def visit(body: list[ast.stmt]) -> None:
        for statement in body:
            lines.add(statement.lineno)
            for decorator in getattr(statement, "decorator_list", []):
                lines.add(decorator.lineno)
            if isinstance(statement, ast.ClassDef):
                visit(statement.body)
            elif isinstance(statement, ast.If | ast.Try):
                visit([s for block in (statement.body, getattr(statement, "orelse", [])) for s in block])

    visit(ast.parse(path.read_text()).body)
    return lines


def _by_function(path: Path, missing: set[int], branches: list[tuple[int, int]]) -> dict[str, tuple[list, list]]:
    """The lines and branches not run, by the innermost function holding them (`Class.method`; `<module>`)."""
    spans: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    spans.append((child.lineno, child.end_lineno or child.lineno, name))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text()), "")

    def owner(line: int) -> str:
        inside = [(start, name) for start, end, name in spans if start <= line <= end]
        return max(inside)[1] if inside else "<module>"

    out: dict[str, tuple[list, list]] = {}
    for line in missing:
        out.setdefault(owner(line), ([], []))[0].append(line)
    for a, b in branches:
        out.setdefault(owner(a), ([], []))[1].append((a, b))
    return out
