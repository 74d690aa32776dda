"""What `rlplace plan --time` and `rlplace tune` share: the cost arguments (`--profile FILE`, `--time`), loading a
config with what the time model reads beside its cluster section (RLinf's `profile_data`), and the prediction of
a plan, printed under its table."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING

from rlplace.errors import ConfigError

if TYPE_CHECKING:
    from rlplace.config.profile_file import Profile
    from rlplace.config.rlinf_profile import WholeConfig
    from rlplace.inventory import Inventory
    from rlplace.model import JobSpec
    from rlplace.plan import Plan
    from rlplace.planner.timing import Prediction
    from rlplace.planner.workload import Workload


def profile_file(path: str) -> Profile:
    """An argparse type for `--profile FILE`: the checked profile, or argparse's error naming the file, line, key
    and value of every problem."""
    from rlplace.config.profile_file import load_profile

    try:
        return load_profile(path)
    except ConfigError as e:
        raise argparse.ArgumentTypeError("; ".join(str(p) for p in e.problems)) from None


def add_profile_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--profile",
        metavar="FILE",
        type=profile_file,
        help="the components' measured costs (measured: {gpus, gpu}, components: {NAME: {seconds, memory_gb}}, gpus:, "
        "model_bytes:; docs/guide.md, 'Choosing a placement'); beats RLinf's profile_data in the config",
    )


def add_time_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--time",
        action="store_true",
        help="predict the seconds of one iteration, phase by phase, from RLinf's profile_data in the config or "
        "--profile (the inputs nobody gave are said to be assumed)",
    )
    add_profile_argument(p)


def load_config(args: argparse.Namespace, *, whole: bool) -> tuple[JobSpec, WholeConfig | None]:
    """The config of `args.file` (or the one a verl entry module composes) with its overrides; with `whole`, also
    what the time model reads beside it."""
    from rlplace.commands.arguments import config_file
    from rlplace.config.loader import load_with
    from rlplace.config.rlinf_profile import read_whole

    path = config_file(args.file, args)
    return load_with(path, read_whole if whole else None, overrides=args.overrides, show_env=args.show_env)


def workload_of(
    spec: JobSpec, whole: WholeConfig | None, written: Plan, inventory: Inventory, args: argparse.Namespace
) -> Workload:
    """The workload of the config as written: its costs from `profile_data` and/or `--profile`; `--model-bytes`,
    where the command has it, beats the profile's and the config's model size."""
    from rlplace.planner.workload import build_workload

    workload = build_workload(spec, written, inventory, whole.rlinf if whole else None, args.profile)
    size = getattr(args, "model_bytes", None)
    if size:
        kept = tuple(a for a in workload.assumed if not a.startswith("model size"))
        workload = dataclasses.replace(workload, model_bytes=size, assumed=kept)
    return workload


def predicted(
    spec: JobSpec, whole: WholeConfig | None, planned: Plan, inventory: Inventory, args: argparse.Namespace, est=None
) -> tuple[Prediction, Workload]:
    """`rlplace plan --time`: the plan's prediction and the workload it was made with."""
    from rlplace.planner.timing import predict

    workload = workload_of(spec, whole, planned, inventory, args)
    usable = est if est is not None and est.model_bytes == (workload.model_bytes or est.model_bytes) else None
    return predict(planned, workload, inventory, usable), workload


def print_prediction(prediction: Prediction, workload: Workload) -> None:
    from rlplace.viz.console import console
    from rlplace.viz.timing import prediction_lines

    out = console()
    for line in prediction_lines(prediction, workload):
        out.print(line, highlight=False, markup=False, soft_wrap=True)
