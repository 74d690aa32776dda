"""`rlplace tune CONFIG`: the fastest feasible placement of the job's timed components on the nodes, by the time
model (docs/guide.md, "Choosing a placement"), written back in the config's own dialect.

It prints the ranked candidates (predicted seconds, mode, GPUs per component, why each loses), the best cluster
section and its plan's prediction; `--write FILE` writes the whole config with that section (`rlplace plan FILE`
plans it as tune did), `--svg`/`--html` its picture, `--format json` one object (`best`, `candidates`,
`as_written`). Exit 0 when a placement fits, 3 when none does, 2 on a config or profile error. On a terminal,
progress goes to stderr once a second on long searches; Ctrl-C stops it with nothing written.
"""

from __future__ import annotations

import argparse
import json
import sys

from rlplace.commands.arguments import add_show_env_argument
from rlplace.commands.costs import add_profile_argument, load_config, workload_of
from rlplace.commands.plan import add_picture_arguments, add_source_arguments, inventory_of, plan_document
from rlplace.errors import PlanError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune",
        help="find the fastest placement (collocated, disaggregated or hybrid) from measured costs",
        description="Search collocated, disaggregated and hybrid placements of the components with costs (RLinf's "
        "profile_data in the config, or --profile) and print the fastest, in the config's own dialect.",
    )
    add_source_arguments(p)
    add_profile_argument(p)
    p.add_argument("--format", choices=("table", "json"), default="table", help="how the result is printed")
    p.add_argument("--write", metavar="FILE", help="write the config with the best placement here (YAML)")
    add_picture_arguments(p)
    add_show_env_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlplace.planner import capacity, estimate, plan
    from rlplace.planner.tune import check_tunable, tune

    spec, whole = load_config(args, whole=True)
    assert whole is not None
    check_tunable(spec)
    inventory = inventory_of(args)
    written = capacity.checked(plan(spec, inventory), inventory)
    workload = workload_of(spec, whole, written, inventory, args)
    result = tune(
        spec, whole.document, workload, inventory, written, progress=_progress if sys.stderr.isatty() else None
    )
    best = result.best
    if best is None:
        problems = [c.problem for c in (*result.candidates, result.written) if c.problem]
        reasons = "; ".join(list(dict.fromkeys(problems))[:3])
        raise PlanError(f"no placement of {', '.join(s.name for s in workload.stages)} fits: {reasons or 'none found'}")
    assert best.plan is not None and best.document is not None and best.prediction is not None
    est = best.prediction.estimate or estimate(best.plan, workload.model_bytes, inventory=inventory)
    if args.write:
        _write(args.write, best.document, spec.source)
    if args.svg or args.html:
        from rlplace.viz import picture

        for path, writer, what in ((args.svg, picture.write_svg, "SVG"), (args.html, picture.write_html, "HTML")):
            if path:
                written_to = writer(best.plan, path, inventory=inventory, estimate=est)
                print(f"wrote {written_to} (topology picture of the best placement, {what})", file=sys.stderr)
    if args.format == "json":
        doc = {
            "best": {
                "seconds": best.seconds,
                "mode": best.mode,
                "gpus": best.gpus,
                "config": best.section,
                "time": best.prediction.to_dict(),
                "plan": plan_document(spec, best.plan, inventory, est),
            },
            "candidates": [_candidate(c) for c in result.candidates],
            "as_written": _candidate(result.written),
            "search": {
                "gpus": result.line_gpus,
                "bounded": result.scored,
                "planned": result.planned,
                "seconds": round(result.elapsed, 3),
            },
        }
        sys.stdout.write(json.dumps(doc, separators=(",", ":")) + "\n")
        return 0
    _print(result, workload, args)
    return 0


def _candidate(c) -> dict:
    return {
        "seconds": c.seconds,
        "mode": c.mode,
        "gpus": c.gpus,
        "label": c.label,
        "config": c.section,
        "problem": c.problem or None,
        "time": c.prediction.to_dict() if c.prediction is not None else None,
    }


def _print(result, workload, args: argparse.Namespace) -> None:
    import yaml

    from rlplace.viz.console import console
    from rlplace.viz.timing import candidate_table, prediction_lines

    out = console()
    best = result.best
    out.print(candidate_table(result))
    for line in prediction_lines(best.prediction, workload):
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    out.print(
        f"searched {result.scored:,} placements of {result.line_gpus} GPUs, planned {result.planned} "
        f"({result.elapsed:.2f} s); the best, as the config's cluster section:",
        highlight=False,
        soft_wrap=True,
    )
    out.print(
        yaml.safe_dump({"cluster": best.section}, sort_keys=False, default_flow_style=None).rstrip(), markup=False
    )
    if args.write:
        out.print(
            f"wrote {args.write}: the config with this placement (rlplace plan {args.write} plans it)", highlight=False
        )


def _write(path: str, document: dict, source: str | None) -> None:
    import yaml

    from rlplace.output_files import write_file

    header = (
        f"# {source or 'the config'} with the placement `rlplace tune` found fastest (the rest as composed).\n"
        "# `rlplace plan` of this file plans it as tune did.\n"
    )
    write_file(path, header + yaml.safe_dump(document, sort_keys=False, default_flow_style=None))


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
