"""The `rlplace` command line: one subcommand per module in `rlplace.commands`.

Each command module defines `register(subparsers)` (adds its parser and sets `func`) and keeps heavy
imports (Ray) inside its `run` function, so `rlplace validate` and `rlplace plan` start fast.
Every deliberate failure is an `RlplaceError`: printed without a traceback, with a stable exit code. Messages
hold values from configs and command lines: every one is printed through `printable` (terminal controls shown
as escapes), argparse's own included.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from typing import Any, NoReturn

from rlplace import __version__
from rlplace.commands.driver import EXIT_NOT_STARTED  # `run ... -- COMMAND` that cannot start
from rlplace.errors import CommandError, ConfigError, PlacementError, PlanError, Problem, RlplaceError
from rlplace.printable import printable

COMMANDS = ("validate", "schema", "plan", "tune", "start", "stop", "run", "demo", "status", "drain")

EXIT_OK, EXIT_CONFIG, EXIT_PLAN, EXIT_PLACEMENT = 0, 2, 3, 4


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """`--help` shows each option's default, except where there is none to show (unset, a plain flag) or
    the help text already states it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        unset = (
            action.default is None
            or action.default is False
            or action.default == []
            or action.default is argparse.SUPPRESS
        )
        if unset or "default:" in text or "%(default)" in text or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """Every `rlplace` parser and subparser formats its help with `HelpFormatter`, and prints its errors (which
    quote the arguments) through `printable`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """A bad value of an option (`argument --inventory: nope.yaml: no such file`) is said in one line: the
        message names the option and what is valid, and a usage dump would bury it; a malformed command line (a
        missing argument, an unknown option) still gets the usage. Either way its text is printable (a value from
        the command line may hold terminal controls)."""
        message = printable(message)
        if message.startswith("argument "):
            self.exit(EXIT_CONFIG, f"{self.prog}: error: {message}\n")
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="rlplace",
        description="Place the workers of distributed RL jobs on the nodes, GPUs and robots of Ray clusters, "
        "from one YAML cluster: section, and run them there.",
        epilog="`rlplace COMMAND --help` shows a command's options. Exit codes: 0 ok, 1 other error, "
        "2 config or command-line error, 3 the cluster cannot hold the plan, 4 Ray could not place the workers; "
        "`run ... -- COMMAND`: 127 the command cannot be started (not found, or its script missing), else the "
        "command's own status (128 + N when signal N ended it).",
    )
    parser.add_argument("--version", action="version", version=f"rlplace {__version__}", help="print the version")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)
    for name in COMMANDS:
        importlib.import_module(f"rlplace.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    saved, warnings.formatwarning = warnings.formatwarning, _warning_line
    try:
        return _run(argv)
    finally:
        warnings.formatwarning = saved


def _run(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    typed, command = list(argv), None
    if argv[:1] == ["run"]:  # `rlplace run CONFIG ... -- COMMAND ...`: the words after `--` are not rlplace's
        from rlplace.commands.driver import split_command

        argv, command = split_command(argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    stray = [i for i, w in enumerate(getattr(args, "overrides", None) or ()) if not _is_override(w)]
    if argv[:1] == ["run"] and command is None and stray:  # `rlplace run job.yaml python train.py`
        from rlplace.commands.run import forgot_dashes

        return usage_error("run", forgot_dashes(args, stray[0], extra))
    if extra:  # argparse takes positionals only before the options: overrides after them are the command's too
        if getattr(args, "overrides", None) is None or not all(_is_override(w) for w in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides = [*args.overrides, *extra]
    args.argv = typed  # the command line as typed, for files that name the command that wrote them
    if argv[:1] == ["run"]:
        if command == []:
            return usage_error("run", "nothing to run after --: write the command, e.g. -- python train.py")
        args.command_line = command
    try:
        return int(args.func(args) or 0)
    except ConfigError as e:
        if all(_on_command_line(p) for p in e.problems):
            return usage_error(args.command, "; ".join(_as_argument(p) for p in e.problems))
        _say(str(e))
        return EXIT_CONFIG
    except PlanError as e:
        _say(f"plan: {e}")
        return EXIT_PLAN
    except PlacementError as e:
        _say(f"placement: {e}")
        return EXIT_PLACEMENT
    except CommandError as e:
        _say(f"error: {e}")
        return EXIT_NOT_STARTED
    except RlplaceError as e:
        _say(f"error: {e}")
        return 1
    except OSError as e:  # a file the user named cannot be read or written (--out, --svg, schema -o, ...)
        where = f"{e.filename}: " if e.filename else ""
        _say(f"error: {where}{e.strerror or e} (check the path and its permissions)")
        return 1
    except KeyboardInterrupt:
        _say("interrupted")
        return 130


def usage_error(command: str, message: str) -> int:
    """A command-line mistake found after parsing, said as argparse says the ones it finds itself."""
    _say(f"rlplace {command}: error: {message}")
    return EXIT_CONFIG


def _say(message: str) -> None:
    print(printable(message), file=sys.stderr)


def _is_override(word: str) -> bool:
    """A Hydra override (`key=value`, `+key=value`, `~key`), not a mistyped option."""
    return not word.startswith("-") and ("=" in word or word.startswith(("+", "~")))


def _on_command_line(problem: Problem) -> bool:
    """A problem with a flag (`--spare`) or an environment variable (`$RLPLACE_NODE_RANK`), not with a config file."""
    return problem.file is None and problem.path.startswith(("--", "$"))


def _as_argument(problem: Problem) -> str:
    if problem.path.startswith("$"):
        return f"{problem.path}={problem.value}: {problem.message}"
    return f"argument {problem.path}: {problem.message}"


def _warning_line(message: Warning | str, *_: object, **__: object) -> str:
    """A warning as the CLI prints it: one line, without the source line Python would show."""
    return f"warning: {printable(message)}\n"


if __name__ == "__main__":
    sys.exit(main())
