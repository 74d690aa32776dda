"""`cluster.profiling`: RLinf's profiler options, checked as RLinf checks them when its cluster starts
(rlinf/scheduler/cluster/config.py, ProfileConfig and its backends in rlinf/scheduler/hardware/accelerators/).

`backend` is required and names a registered backend: `nsight` (Nsight Systems: `options`, a mapping of
`nsys profile` options, and `flags`, bare flags) or `rocprof_sys` (ROCm Systems Profiler: `args`, its command-line
arguments, and `env`, variables for the profiled worker). Both take `enabled`, `worker_groups` (a name or a
list), `steps` (step indices >= 0) and `output_dir`. Keys of another backend, or of none, are errors (RLinf
refuses unknown fields), as are the option pairs Nsight refuses: `stop-on-range-end` beside `capture-range-end`,
`o` beside `output`, and a name given both as a flag and as an option (with `steps`, RLinf adds the options
`capture-range` and `capture-range-end` itself unless they are written). The section is kept as written for the
application (`JobSpec.extras`).
"""

from __future__ import annotations

from collections.abc import Mapping

from rlplace.config.fields import (
    INVALID,
    Anything,
    Field,
    Flag,
    Integer,
    Invalid,
    JsonSchema,
    Kind,
    ListOf,
    MapOf,
    Maybe,
    Section,
    Switch,
)
from rlplace.config.hardware import TEXT
from rlplace.config.problems import Path, Reporter, did_you_mean, show

_NAMES = Switch(((str, TEXT), ((list, tuple), ListOf(Anything(), min_items=0))))
_COMMON = {
    "backend": Field(TEXT, "the profiler: nsight or rocprof_sys", True),
    "enabled": Field(Flag(), "profile the matching worker groups (default true)"),
    "worker_groups": Field(Maybe(_NAMES), "worker group names to profile (a name or a list; all: every group)"),
    "steps": Field(Maybe(ListOf(Integer(0), min_items=0)), "training steps to profile (default: every step)"),
    "output_dir": Field(Maybe(TEXT), "where the profiles are written (default: under the run's log directory)"),
}
_SCALARS = MapOf(Anything(), "names to values")
BACKENDS: dict[str, Section] = {
    "nsight": Section(
        "an nsight profiling section",
        {
            **_COMMON,
            "options": Field(Maybe(_SCALARS), "nsys profile options by name (t: cuda,nvtx; capture-range: ...)"),
            "flags": Field(Maybe(_NAMES), "bare nsys profile flags (a name or a list)"),
        },
    ),
    "rocprof_sys": Section(
        "a rocprof_sys profiling section",
        {
            **_COMMON,
            "args": Field(Maybe(_SCALARS), "rocprof-sys-python arguments by name"),
            "env": Field(Maybe(_SCALARS), "variables set for the profiled worker"),
        },
    ),
}


class Profiling(Kind[dict[object, object]]):
    """`cluster.profiling`: a mapping checked against its backend's keys and RLinf's rules (module doc)."""

    def check(self, value: object, path: Path, rep: Reporter) -> dict[object, object] | Invalid:
        if not isinstance(value, Mapping):
            rep.add(path, f"must be a mapping with backend: {' or '.join(BACKENDS)}, got {show(value)}", value)
            return INVALID
        backend = value.get("backend")
        if backend not in BACKENDS:
            what = "needs 'backend'" if backend in (None, "") else f"backend {show(backend)} is not one RLinf registers"
            rep.add(
                (*path, "backend"),
                f"{what}{did_you_mean(backend, BACKENDS) or ':'} backends: {', '.join(BACKENDS)}",
                backend,
            )
            return INVALID
        checked = BACKENDS[str(backend)].check(value, path, rep)
        if checked is INVALID or any(v is INVALID for v in checked.values()):
            return INVALID
        _names(value, path, rep)
        if backend == "nsight":
            _nsight(value, path, rep)
        return dict(value)

    def schema(self) -> JsonSchema:
        return {"anyOf": [{"type": "null"}, *(s.schema() for s in BACKENDS.values())]}

    def describe(self) -> str:
        return "a profiling section with backend nsight or rocprof_sys"


def _names(value: Mapping[str, object], path: Path, rep: Reporter) -> None:
    """`worker_groups` and `flags` list names; a flag may not be empty (RLinf: 'must not contain empty names')."""
    for key in ("worker_groups", "flags"):
        items = _listed(value.get(key))
        if key == "flags" and any(str(n) == "" for n in items):
            rep.add((*path, key), "a flag name is empty; write each nsys flag's name, like 'trace-fork-before-exec'")


def _listed(names: object) -> list[object]:
    """The names of `worker_groups` or `flags`: one name, or a list of them (checked by `_NAMES`)."""
    return [names] if isinstance(names, str) else list(names) if isinstance(names, list | tuple) else []


def _nsight(value: Mapping[str, object], path: Path, rep: Reporter) -> None:
    written = value.get("options")
    options = dict(written) if isinstance(written, Mapping) else {}  # checked by _SCALARS: a mapping or null
    opath = (*path, "options")
    for a, b in (("stop-on-range-end", "capture-range-end"), ("o", "output")):
        if a in options and b in options:
            rep.add(opath, f"names both '{a}' and '{b}', which RLinf refuses (they set the same thing): keep one", a)
    if value.get("steps") is not None:  # RLinf gates steps with these unless the options set them
        options.setdefault("capture-range", "cudaProfilerApi")
        options.setdefault("capture-range-end", "stop")
    names = [str(f) for f in _listed(value.get("flags"))]
    both = sorted(set(names) & set(options))
    if both:
        added = " (RLinf adds it as an option because steps is set)" if "capture-range" in both else ""
        rep.add(
            (*path, "flags"),
            f"{', '.join(both)} is both a flag and an option{added}; RLinf refuses a name given twice: keep one",
            both,
        )
