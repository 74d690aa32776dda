"""Config values read from the environment (`${oc.env:VAR}`), and how everything rlplace prints shows them.

The environment often holds secrets: an API key under `env_vars`, the cluster's token. So:

- Ray's authentication variables (`RAY_AUTH_*`: the token, its file, the mode) are never interpolated into
  anything: a config value, a search path, a defaults entry naming one is an error that names the variable and
  never its value;
- every other value read from the environment is recorded as a `model.EnvValue` (key path, text as written,
  value), and pictures, plan text and messages show it as written (`hide`), unless the user asks for the values
  (`--show-env`, `load(..., show_env=True)`); `rlplace plan --format json` lists them under `from_environment`.

Values shorter than `MIN_HIDDEN` characters are hidden where they are a whole value (a label, an `env_vars`
value) but not inside a sentence, where "8" or "on" would replace every such word; a secret is longer.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from typing import Any

from rlplace.model import EnvValue

#: Ray's token authentication reads RAY_AUTH_MODE, RAY_AUTH_TOKEN and RAY_AUTH_TOKEN_PATH (rlplace.ray.auth).
TOKEN_PREFIX = "RAY_AUTH_"
MIN_HIDDEN = 4


def is_token_variable(name: str) -> bool:
    return name.strip().startswith(TOKEN_PREFIX)


def token_variable_refused(name: str) -> str:
    """Why an interpolation of `name` is refused (the message of the problem, after "cannot resolve X:")."""
    return (
        f"{name.strip()} is Ray's token authentication, which rlplace never puts into a config (nor shows): Ray "
        "reads it from the environment itself"
    )


def hide(text: str, values: Iterable[EnvValue]) -> str:
    """`text` with every value that came from the environment written as it is in the config; a short value only
    where it is the whole text. One pass, longest value first, so that what replaces a value is never searched
    again (a written `${oc.decode:'[${oc.env:A}, 10.0.0.1]'}` holds another value, `10.0.0.1`)."""
    written = {v.value: v.written for v in values if v.value}
    if text in written:
        return written[text]
    long = sorted((value for value in written if len(value) >= MIN_HIDDEN), key=len, reverse=True)
    if not long:
        return text
    return re.sub("|".join(map(re.escape, long)), lambda m: written[m.group(0)], text)


def hide_in(data: Any, values: tuple[EnvValue, ...]) -> Any:
    """`data` (strings, lists, tuples, dicts of them) with `hide` applied to every string in it, keys included."""
    if not values:
        return data
    if isinstance(data, str):
        return hide(data, values)
    if isinstance(data, dict):
        return {hide_in(k, values): hide_in(v, values) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(hide_in(v, values) for v in data)
    return data


class EnvReads:
    """What OmegaConf's `oc.env` resolver read while `watching` was active: the variables and their values, and
    the token variables it was asked for and refused."""

    def __init__(self) -> None:
        self.read: list[str] = []
        self.values: dict[str, str] = {}
        self.refused: list[str] = []

    def env_values(self, where: str) -> list[EnvValue]:
        """What was read, as the values outputs show as written (`${oc.env:NAME}`), read at `where`."""
        return [EnvValue(where, f"${{oc.env:{name}}}", value, (name,)) for name, value in self.values.items() if value]


class TokenVariableError(KeyError):
    """Raised inside OmegaConf's resolution for a `RAY_AUTH_*` variable (OmegaConf wraps it; `EnvReads` says it)."""


@contextlib.contextmanager
def watching(omegaconf: Any, reads: EnvReads | None = None) -> Iterator[EnvReads]:
    """OmegaConf's `oc.env` resolver, for the time of the block, records what it reads (in `reads`, if given) and
    refuses the token variables; the resolver registered before is restored afterwards."""
    from omegaconf.basecontainer import BaseContainer  # the registry of resolvers (no public getter)
    from omegaconf.resolvers import oc

    reads = EnvReads() if reads is None else reads

    def env(key: str, *default: Any) -> Any:
        if is_token_variable(str(key)):
            reads.refused.append(str(key).strip())
            raise TokenVariableError(token_variable_refused(str(key)))
        reads.read.append(str(key))
        value = oc.env(key, *default)
        if isinstance(value, str):
            reads.values[str(key)] = value
        return value

    saved = BaseContainer._resolvers.get("oc.env")
    omegaconf.OmegaConf.register_new_resolver("oc.env", env, replace=True)
    try:
        yield reads
    finally:
        if saved is None:
            BaseContainer._resolvers.pop("oc.env", None)
        else:
            BaseContainer._resolvers["oc.env"] = saved
