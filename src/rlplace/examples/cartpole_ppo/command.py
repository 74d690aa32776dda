"""The CartPole PPO pipeline as `rlplace demo` and `rlplace run CONFIG` (without a command of one's own) run it.

On an existing cluster (`--address`, or one this machine is already part of) or on an embedded simulated one
(`--simulate 3x2,1x0`, the demo's `--nodes`). It shows the plan, writes the topology picture, trains with a
progress bar until CartPole is solved or the budget ends, prints the reward curve and where every worker ran,
and removes everything it created (and stops the simulated cluster). The demo's node-loss options
(`--kill-node`, `--drain-node`, `--spare`, `--elastic`, ...) are in `node_loss`.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
from typing import Any

from rlplace.cli_types import non_negative_seconds, positive_int, positive_seconds
from rlplace.errors import PlacementError, RlplaceError
from rlplace.examples.cartpole_ppo.node_loss import node_fault, simulated_spares_of
from rlplace.output_files import output_folder
from rlplace.planner.profile_record import check_profile_request


def add_pipeline_arguments(p: argparse.ArgumentParser, title: str) -> None:
    """The pipeline's options (`rlplace run CONFIG` and `rlplace demo`), in a help section of `title`: its budget,
    outputs and time limits."""
    from rlplace.examples.cartpole_ppo.budget import Budget

    default = Budget()
    g = p.add_argument_group(title)
    g.add_argument(
        "--iterations", type=positive_int, default=default.iterations, help="training budget: stop after N iterations"
    )
    g.add_argument("--seed", type=int, default=default.seed, help="seed of the environments and the networks")
    g.add_argument(
        "--out",
        type=pathlib.Path,
        default=pathlib.Path("."),
        help="directory for the topology picture (.svg, .html; `run ... -- COMMAND` writes it too) and, for the "
        "bundled pipeline in auto mode, resource_pool_auto.yaml",
    )
    g.add_argument(
        "--timeout",
        type=positive_seconds,
        default=60.0,
        help="seconds the placement groups may take; then the run fails naming what is missing on which node",
    )
    g.add_argument(
        "--checkpoint-dir",
        metavar="DIR",
        help="where train rank 0 checkpoints after each iteration, for workers relaunched after a node loss; on a "
        "real cluster a directory every train node can read (default: a temporary directory on this machine)",
    )
    g.add_argument(
        "--replace-within",
        type=non_negative_seconds,
        metavar="SECONDS",
        help="how long a lost node's workers wait for a spare or replacement before the run fails with "
        "NodeLostError (default: 60; 10 on an embedded cluster, which nothing else can join; 0: fail at once)",
    )


def check_fits(spec: Any) -> None:
    """Refuse a config the pipeline cannot run (before any cluster starts), and a missing demo extra."""
    _require_demo_extra()
    from rlplace.examples.cartpole_ppo.pipeline import check_config

    check_config(spec)


def execute(
    spec: Any,
    *,
    simulate: str | None,
    address: str | None,
    args: argparse.Namespace,
    picture_stem: str,
    simulate_flag: str = "--simulate",
) -> int:
    """Plan, place, train, report, tear down, for a loaded `spec` the pipeline fits (`check_fits`). Returns 0 once
    the run completed, solved or not (the report says which); failures raise the RlplaceError the CLI turns into
    exit codes 2-4. `simulate_flag` is the option `simulate` was given with (its errors name it)."""
    from rlplace.viz.console import console as terminal

    if getattr(args, "elastic", False):
        from rlplace.examples.cartpole_ppo.pipeline import elastic_spec

        spec = elastic_spec(spec)
    output_folder(args.out)  # an unwritable --out (or a link there) fails before any cluster starts, too
    check_profile_request(args.profile_out, args.profile_phase, spec)
    console = terminal()
    if simulate:
        from rlplace.planner import plan
        from rlplace.ray.local_raylets import check_machine_holds, simulated_cluster, simulated_inventory

        nodes = simulated_inventory(simulate)
        spares = simulated_spares_of(args, nodes)
        check_machine_holds(len(nodes) + len(spares), simulate, simulate_flag)  # at once, before planning
        plan(spec, nodes)  # a plan that cannot fit fails here, before a cluster is started for nothing
        more = f" and {len(spares)} hot spare{'s' if len(spares) != 1 else ''}" if spares else ""
        console.print(f"Starting an embedded Ray cluster: {simulate}{more} (COUNTxGPUS[:MODEL], logical GPUs) ...")
        cluster = None
        try:
            with simulated_cluster(nodes, spares, on_interrupt=_exit_interrupted(console)) as cluster:
                return _train(spec, console, args, picture_stem, cluster)
        finally:  # also when training failed (a NodeLostError, say): the cluster is gone either way
            if cluster is not None:
                session = os.path.basename(cluster.session_dir)
                if cluster.killed:
                    killed = ", ".join(cluster.killed)
                    console.print(f"Embedded cluster {session} stopped; had to kill: {killed}", style="yellow")
                else:
                    console.print(
                        f"Embedded cluster {session} stopped: none of its processes is left (process table checked)."
                    )
    from rlplace.ray.join import join, named_address

    # Joins within seconds or says why (Ray alone retries an unreachable address for minutes); quietly:
    # the workers' logs stay in the cluster's log files, the terminal shows the plan and the report.
    # Only a cluster the user named: never one that happens to run on this machine.
    join(named_address(address, spec))
    return _train(spec, console, args, picture_stem)


def _train(spec: Any, console: Any, args: argparse.Namespace, picture_stem: str, cluster: Any | None = None) -> int:
    """Place and run the pipeline on the cluster this process is connected to (`cluster`: the embedded one)."""
    import rlplace
    from rlplace.examples.cartpole_ppo.budget import Budget
    from rlplace.examples.cartpole_ppo.pipeline import run_pipeline
    from rlplace.examples.cartpole_ppo.report import summary
    from rlplace.viz.preview import write_pictures

    export = args.out / "resource_pool_auto.yaml"
    window = args.replace_within
    window = window if window is not None else (10.0 if cluster is not None else 60.0)
    job = rlplace.connect(spec, timeout_s=args.timeout, export_path=export, replace_within_s=window)
    kill = node_fault(args, cluster)
    with job, kill:
        shown = _show_plan(job, console, args.out / picture_stem)
        budget = Budget(iterations=args.iterations, seed=args.seed)
        with _progress(console, budget.iterations) as advance:
            result = run_pipeline(
                job,
                budget,
                progress=kill.counting(advance),
                checkpoint_dir=args.checkpoint_dir,
                on_start=kill.start,
                may_stop=lambda: kill.settled(job.events),
                stop=(lambda: kill.settled(job.events)) if getattr(args, "stop_when_handled", False) else None,
            )
        if getattr(args, "profile_out", None):
            _write_profile(job, spec, args, console)
        if job.events:  # the picture as it ends: lost nodes, ranks served by spares
            svg, _ = write_pictures(job.plan, job.live, args.out / picture_stem, shown, job.node_health())
            console.print(f"Topology picture after the node loss: {svg}")
    if kill.rank is not None and kill.cluster is not None:
        result.failover.insert(0, kill.describe(job.events))
    console.print(summary(result))
    wrong = [p.mismatch for p in result.placed if p.mismatch]
    if wrong:
        raise PlacementError("workers ran off their plan:\n  " + "\n  ".join(wrong))
    return 0


def _write_profile(job: Any, spec: Any, args: argparse.Namespace, console: Any) -> None:
    """The run's phases as a profile (planner/profile_record.py): the model it syncs is the CartPole networks,
    unless the config says another size."""
    from rlplace.examples.cartpole_ppo.ppo import parameter_bytes
    from rlplace.planner.profile_record import recorded_profile, write_profile

    job.record_memory()
    recorded = recorded_profile(
        job.plan,
        job.live,
        job.phase_times.seconds,
        job.phase_times.memory_gb,
        mapping=dict(args.profile_phase),
        model_bytes=spec.model_bytes or parameter_bytes(),
        written_by=_command_line(args),
    )
    path = write_profile(args.profile_out, recorded)
    console.print(recorded.describe(path, spec.source or "CONFIG"), highlight=False, soft_wrap=True)


def _command_line(args: argparse.Namespace) -> str:
    """The command line as typed, for the profile's header."""
    import shlex

    return shlex.join(["rlplace", *getattr(args, "argv", ())])


def _show_plan(job: Any, console: Any, stem: pathlib.Path) -> Any:
    """The plan as every run shows it (`rlplace.viz.preview`), its estimate counting the model the pipeline
    really syncs (the CartPole networks), and the job's warnings; the estimate shown."""
    from rich.text import Text

    from rlplace.examples.cartpole_ppo.ppo import parameter_bytes
    from rlplace.planner import estimate
    from rlplace.viz.preview import show_plan

    synced = estimate(job.plan, parameter_bytes(), inventory=job.live, model_source=SYNCED_MODEL)
    show_plan(console, job.plan, job.live, stem, synced)
    for warning in job.warnings:
        console.print(Text.assemble(("warning:", "yellow"), f" {warning}"))
    return synced


#: Where the demo's model size comes from, as the estimate line and the picture say it.
SYNCED_MODEL = "the CartPole actor and critic this pipeline syncs"


class _progress:
    """A rich progress bar over iterations showing the windowed average return; yields its advance callback."""

    def __init__(self, console: Any, total: int):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("training"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("avg return {task.fields[avg]:>5.1f}"),
            TimeElapsedColumn(),
            console=console,
        )
        self._task = self._bar.add_task("train", total=total, avg=0.0)

    def __enter__(self) -> Any:
        self._bar.start()
        return self.advance

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def advance(self, iteration: int, curve: Any) -> None:
        self._bar.update(self._task, completed=iteration, avg=curve.average)


#: The exit status after Ctrl-C (128 + SIGINT, as shells and the CLI report it).
EXIT_INTERRUPTED = 130


def _exit_interrupted(console: Any) -> Any:
    """What the pipeline does when Ctrl-C stopped the embedded cluster's start (`StartInterrupted`, in the thread
    that killed its processes): say so and exit 130 at once (Ray's start-up would hold the main thread for half a
    minute more); nothing else has started yet."""

    def exit_now(e: Any) -> None:
        console.print(f"Interrupted while the embedded cluster started: {e.describe()}.", highlight=False)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)

    return exit_now


def _require_demo_extra() -> None:
    """The pipeline needs numpy and gymnasium, which a plain `pip install rlplace` does not bring."""
    try:
        import gymnasium  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        raise RlplaceError(f"the CartPole pipeline needs {e.name}: pip install 'rlplace[demo]'") from e
