"""How the docs' code blocks run under `make test` (Sybil parsers and evaluators; see the root conftest.py).

The convention, also written in docs/decisions.md ("Executable docs"):

- ` ```bash ` / ` ```sh `: the block runs as one bash script with `set -e`: every command must succeed.
- ` ```console `: `$ command` lines, each followed by the output it must print (stdout and stderr together).
  `...` on a line of its own matches any number of lines, `...` inside a line any text; trailing spaces do
  not count. A command meant to fail shows it: `$ rlplace validate bad.yaml; echo "exit $?"`.
- ` ```python `: Sybil runs it in the page's namespace, blocks in order; a block that starts with `>>>` is a
  doctest (ELLIPSIS and NORMALIZE_WHITESPACE on).
- ` ```yaml ` with a top-level `cluster:` key must load with `rlplace.config.load`.
- ` ```python train.py ` (a language, then a file name): the block is that file, written into the page's scratch
  directory (not run); a later block runs it (`rlplace run job.yaml --simulate 2x8,1x4 -- python train.py`).
- Opting out: `<!-- skip: next "REASON" -->` on the line before the fence (Sybil's skip directive), with one
  of the fixed reasons: "needs a live multi-node cluster", "needs a browser", "illustrative: names not
  defined here", "long-running: covered by a slow test", "needs the framework's checkout (DEVELOPERS.md)"
  (commands run from the root of RLinf's or RLightning's tree, which stays out of this repository).

Every page runs in its own scratch directory laid out like the repository root (a copy of src/, examples/,
bench/, scripts/, docs/, tests/data/, the venv running the tests as .venv), holding `job.yaml` (the shipped
disaggregate config) and `nodes.yaml`; pages under examples/NAME/ run in that directory, as their commands
are written from there. Nothing a block writes reaches the repository.
"""

from __future__ import annotations

import doctest
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

import yaml
from sybil import Example, Region, Sybil
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: The pages whose blocks run, relative to the repository root.
PAGES = ("README.md", "DEVELOPERS.md", "docs/*.md", "examples/*/README.md")
#: What the scratch directory copies from the repository (read-only material the docs refer to).
COPIED = ("src", "examples", "bench", "scripts", "docs", "tests/data", "pyproject.toml", "Makefile", "README.md")
#: `job.yaml` in the docs: a config that plans on every inventory they use, and exports pools.
JOB_YAML = ROOT / "src/rlplace/examples/cartpole_ppo/configs/disaggregate.yaml"
#: `nodes.yaml` in the docs: the inventory file of docs/planner.md.
NODES_YAML = """\
nodes:
  - {count: 2, gpus: 8, model: A800, cpus: 64}
  - {gpus: 0, cpus: 16, labels: {robot: franka}}
"""
#: One block may take this long; a block that hangs fails instead of stalling the suite.
BLOCK_TIMEOUT_S = 120.0
SANDBOX = "__docs_sandbox__"


def sybil(root: pathlib.Path = ROOT, pages: Sequence[str] = PAGES) -> Sybil:
    """The Sybil that collects `pages` under `root` (the root conftest.py turns it into pytest items)."""
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    return Sybil(
        parsers=[
            SkipParser(),
            PythonCodeBlockParser(doctest_optionflags=flags),
            CodeBlockParser("bash", run_bash),
            CodeBlockParser("sh", run_bash),
            CodeBlockParser("console", run_console),
            CodeBlockParser("yaml", load_cluster_yaml),
            FileBlockParser(),
        ],
        patterns=list(pages),
        path=str(root),
        setup=enter_sandbox,
        teardown=leave_sandbox,
    )


class FileBlockParser:
    """` ```python train.py `: a block that is a file of the page (written into its scratch directory, not run)."""

    lexer = RawFencedCodeBlockLexer(info_pattern=re.compile(r"(?P<language>\w+) (?P<file>[\w.-]+)$\n", re.MULTILINE))

    def __call__(self, document: Any) -> Any:
        for region in self.lexer(document):
            yield Region(region.start, region.end, region.lexemes["source"], write_file, region.lexemes)


# -- the scratch directory -------------------------------------------------------------------------------

_template: pathlib.Path | None = None


def _template_dir() -> pathlib.Path:
    """One copy of the repository material per test session; every page's sandbox links to it."""
    global _template
    if _template is None:
        _template = pathlib.Path(tempfile.mkdtemp(prefix="rlplace-docs-"))
        skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
        for name in COPIED:
            src, dst = ROOT / name, _template / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst, symlinks=True, ignore=skip)
            else:
                shutil.copy2(src, dst)
    return _template


def enter_sandbox(namespace: dict[str, Any]) -> None:
    """A fresh scratch directory for one page; Python blocks run with it as the working directory."""
    template = _template_dir()
    sandbox = pathlib.Path(tempfile.mkdtemp(prefix="page-", dir=template))
    for entry in template.iterdir():
        if not entry.name.startswith("page-"):
            (sandbox / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    (sandbox / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    shutil.copy(JOB_YAML, sandbox / "job.yaml")
    (sandbox / "nodes.yaml").write_text(NODES_YAML)
    namespace[SANDBOX] = sandbox
    namespace["__docs_saved_cwd__"] = os.getcwd()
    os.chdir(sandbox)


def leave_sandbox(namespace: dict[str, Any]) -> None:
    os.chdir(namespace.pop("__docs_saved_cwd__"))
    shutil.rmtree(namespace.pop(SANDBOX), ignore_errors=True)


def _cwd(example: Example) -> pathlib.Path:
    """The sandbox, or its examples/NAME/ for a page that lives there."""
    sandbox: pathlib.Path = example.namespace[SANDBOX]
    page_dir = pathlib.Path(example.path).resolve().parent
    if not page_dir.is_relative_to(ROOT):
        return sandbox
    inside = page_dir.relative_to(ROOT)
    return sandbox / inside if inside.parts[:1] == ("examples",) else sandbox


def shell(script: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """Run `script` with bash as a user of the repository would: the venv's `rlplace` and `python` first on
    PATH, no inherited Ray address or token (a doc command must never join someone's cluster), a fixed width
    for tables."""
    unset = ("RAY_ADDRESS", "VIRTUAL_ENV", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(PATH=f"{pathlib.Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", COLUMNS="200")
    try:
        return subprocess.run(
            ["bash", "-c", script],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"still running after {BLOCK_TIMEOUT_S:.0f} s:\n{script}") from e


# -- evaluators ------------------------------------------------------------------------------------------


def run_bash(example: Example) -> str | None:
    """A bash block: every command must succeed."""
    done = shell("set -eo pipefail\n" + example.parsed, _cwd(example))
    if done.returncode != 0:
        return f"exit code {done.returncode} from the block:\n{example.parsed}\n{done.stdout}{done.stderr}"
    return None


def run_console(example: Example) -> str | None:
    """A console block: each `$ command` must print what follows it."""
    for command, expected in console_steps(example.parsed):
        done = shell(command, _cwd(example))
        actual = done.stdout + done.stderr
        if not output_matches(expected, actual):
            return f"$ {command}\nexpected:\n{expected}\ngot (exit code {done.returncode}):\n{actual}"
    return None


def write_file(example: Example) -> None:
    """A file block: its text is the file named on its fence, in the page's scratch directory."""
    (_cwd(example) / example.region.lexemes["file"]).write_text(str(example.parsed))


def load_cluster_yaml(example: Example) -> str | None:
    """A YAML block that is a cluster config must be a valid one (other YAML blocks are not configs)."""
    from rlplace.config import load

    try:
        data = yaml.safe_load(example.parsed)
    except yaml.YAMLError as e:
        return f"not YAML: {e}"
    if isinstance(data, dict) and "cluster" in data:
        load(example.parsed)  # a ConfigError names every problem
    return None


# -- console blocks --------------------------------------------------------------------------------------


def console_steps(text: str) -> list[tuple[str, str]]:
    """`$ command` lines with the output lines under each."""
    steps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"a console block starts with a `$ command` line, not {line!r}")
    return [(command, "\n".join(lines)) for command, lines in steps]


def output_matches(expected: str, actual: str) -> bool:
    """`actual` is `expected` with its `...` filled in; trailing spaces and blank lines at the end do not count."""
    pattern = []
    for line in _lines(expected):
        if line.strip() == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append(r"[^\n]*?".join(re.escape(part) for part in line.split("...")) + r"\n")
    return re.fullmatch("".join(pattern), "".join(f"{line}\n" for line in _lines(actual)), re.DOTALL) is not None


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines
