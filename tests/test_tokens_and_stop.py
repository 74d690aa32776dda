"""Where the token is looked for, the file a head creates, what `rlplace start` adds to `ray start`, the open-cluster
warning, and `rlplace stop`'s bookkeeping: no Ray cluster needed (tests/ray/test_secure_start.py runs real ones).
Then token files and records as an attacker would plant them (issue 27)."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
import uuid
import warnings

import pytest

from rlplace.cli import main
from rlplace.commands import local_nodes, start
from rlplace.errors import ClusterAccessError, RlplaceError
from rlplace.ray import auth


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A HOME of the test's own: ~/.ray/auth_token and ~/.rlplace/started are in it."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for var in auth.AUTH_ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_token_is_found_in_rays_order(home):
    default = write(home / ".ray" / "auth_token", " at-home\n")
    named = write(home / "named", "from-path\n")
    assert auth.find_token({}).value == "at-home" and auth.find_token({}).source == str(default)
    assert auth.find_token({"RAY_AUTH_TOKEN_PATH": str(named)}).value == "from-path"
    both = {"RAY_AUTH_TOKEN": " from-env ", "RAY_AUTH_TOKEN_PATH": str(named)}
    assert auth.find_token(both).value == "from-env" and auth.find_token(both).source == "$RAY_AUTH_TOKEN"
    assert auth.find_token({"RAY_AUTH_TOKEN": ""}).value == "at-home"  # empty counts as unset, as in Ray
    assert auth.find_token(both, token_file=default).source == f"--token-file {default}"  # the flag comes first
    assert "at-home" not in repr(auth.find_token({}))


def test_no_token_anywhere_and_where_it_was_looked_for(home):
    assert auth.find_token({}) is None
    write(home / ".ray" / "auth_token", "\n")  # empty: no token (Ray says the same)
    assert auth.find_token({}) is None
    assert auth.looked_at({"RAY_AUTH_TOKEN": ""}) == (
        f"$RAY_AUTH_TOKEN (empty), $RAY_AUTH_TOKEN_PATH (unset), {home}/.ray/auth_token (empty)"
    )


@pytest.mark.parametrize("content", [None, ""])
def test_a_token_file_named_but_unreadable_or_empty_is_an_error(home, content):
    """Ray aborts the whole process (a failed C++ check) on such a RAY_AUTH_TOKEN_PATH; rlplace says which file."""
    path = home / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ClusterAccessError, match=rf"\$RAY_AUTH_TOKEN_PATH={path}: ") as e:
        auth.find_token({"RAY_AUTH_TOKEN_PATH": str(path)})
    assert isinstance(e.value, ConnectionError)


def test_a_head_creates_its_token_for_its_owner_only_and_then_reuses_it(home):
    token, created = auth.token_for_head({})
    path = home / ".ray" / "auth_token"
    assert created and token.path == path and len(path.read_text()) == 64
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again, created = auth.token_for_head({})
    assert not created and again.value == token.value
    chosen, created = auth.token_for_head({}, home / "secrets" / "rl.token")
    assert created and chosen.value != token.value and chosen.source == f"--token-file {home}/secrets/rl.token"
    from_env, created = auth.token_for_head({"RAY_AUTH_TOKEN": "abc" * 11})
    assert not created and from_env.path is None and from_env.source == "$RAY_AUTH_TOKEN"
    named = {"RAY_AUTH_TOKEN_PATH": str(home / "secrets" / "rl.token")}
    from_path, created = auth.token_for_head(named)  # an existing $RAY_AUTH_TOKEN_PATH is used as it is
    assert not created and from_path.value == chosen.value and from_path.source.startswith("$RAY_AUTH_TOKEN_PATH=")


def test_a_token_file_beside_a_token_variable_is_refused(home):
    with pytest.raises(ClusterAccessError, match=r"--token-file .*/t and \$RAY_AUTH_TOKEN both name a token"):
        auth.head_token_path({"RAY_AUTH_TOKEN": "x"}, home / "t")
    assert auth.head_token_path({"RAY_AUTH_TOKEN_PATH": str(home / "t")}, home / "t") == home / "t"  # the same file


def test_ray_start_gets_the_token_rlplace_checked_not_a_file_to_read_again(home):
    """Issue 36: a token file in a shared folder, replaced by another user after rlplace checked it and before Ray
    read it, chose the token the cluster required. `ray start` (and `rlplace run`'s command) now gets the value."""
    path = write(home / "shared" / "token", "checked-" + "x" * 32 + "\n")
    token, created = auth.token_for_head({}, path)
    path.write_text("swapped-" + "y" * 32 + "\n")
    env = start.start_environment({"RAY_AUTH_TOKEN_PATH": str(path)}, auth.ray_start_environment(token))
    assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"] == "checked-" + "x" * 32
    assert "RAY_AUTH_TOKEN_PATH" not in env and not created
    assert auth.ray_start_environment(auth.Token("v", "$RAY_AUTH_TOKEN")) == {
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": "v",
        "RAY_AUTH_TOKEN_PATH": None,
    }
    assert auth.ray_start_environment(None) == {"RAY_AUTH_MODE": "disabled"}


@pytest.mark.parametrize(
    ("value", "found"),
    [
        (" \tabc\n", "abc"),  # Ray strips " \t\n\r\f\v" (measured on Ray 2.60: the same)
        ("abc\u00a0", "character 4 of the token is not ASCII"),  # Python's strip() would drop it, Ray keeps it
        ("abc\x1c", "character 4 of the token is a control character (U+001C)"),  # likewise
        ("  ", "$RAY_AUTH_TOKEN holds only whitespace: Ray would take it for an empty token and abort"),
    ],
)
def test_the_environment_token_is_stripped_as_ray_strips_it(home, value, found):
    """Ray 2.60 presents " abc\u00a0" as it is (and aborts: not ASCII), and takes "  " for an empty token without
    looking further (token mode then aborts); rlplace used to strip them to "abc" and to no token at all."""
    write(home / ".ray" / "auth_token", "at-home\n")
    if found == "abc":
        assert auth.find_token({"RAY_AUTH_TOKEN": value}).value == found
        return
    with pytest.raises(ClusterAccessError) as e:
        auth.find_token({"RAY_AUTH_TOKEN": value})
    assert found in str(e.value)


def test_token_paths_are_absolute(home, monkeypatch, capsys):
    """A relative --token-file made Ray's workers (started in other folders) abort; every path rlplace reads,
    passes on or shows is absolute."""
    monkeypatch.chdir(home)
    write(home / "rel" / "token", "t" * 40 + "\n")
    assert auth.find_token({"RAY_AUTH_TOKEN_PATH": "rel/token"}).path == home / "rel" / "token"
    assert auth.find_token({}, token_file=auth.absolute_path("rel/token")).path == home / "rel" / "token"
    assert main(["start", "--head", "--token-file", "rel/token", "--accelerator", "A800", "--dry-run"]) == 0
    assert f"RAY_AUTH_TOKEN=<the token in {home}/rel/token>" in capsys.readouterr().out


def test_dry_run_shows_the_token_environment_creates_nothing_and_never_shows_the_token(home, capsys, monkeypatch):
    assert main(["start", "--head", "--node-rank", "0", "--accelerator", "A800", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"RAY_AUTH_MODE=token RAY_AUTH_TOKEN=<the token in {home}/.ray/auth_token> " in out
    assert not (home / ".ray").exists()
    assert main(["start", "--head", "--insecure", "--accelerator", "A800", "--dry-run"]) == 0
    assert "RAY_AUTH_MODE=disabled " in capsys.readouterr().out
    monkeypatch.setenv("RAY_AUTH_TOKEN", "very-secret")
    assert main(["start", "--head", "--accelerator", "A800", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "RAY_AUTH_MODE=token " in out and "very-secret" not in out
    assert main(["start", "--address", "10.0.0.1:6379", "--accelerator", "A800", "--dry-run"]) == 0
    assert "RAY_AUTH" not in capsys.readouterr().out  # a node takes the head's mode, asked when it really starts


@pytest.mark.parametrize(
    ("argv", "env", "where"),
    [
        (["--address", "10.0.0.1:6379", "--insecure"], {}, "--insecure: only a head is started open"),
        (["--head", "--insecure", "--token-file", "t"], {}, f"--insecure: contradicts --token-file {os.getcwd()}/t"),
        (["--head"], {"RAY_AUTH_MODE": "disabled"}, "$RAY_AUTH_MODE=disabled: rlplace start --head requires a token"),
    ],
)
def test_opening_a_cluster_takes_insecure_on_a_head(home, argv, env, where, capsys, monkeypatch):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert main(["start", *argv, "--accelerator", "A800", "--dry-run"]) == 2
    assert where in capsys.readouterr().err


def test_an_open_cluster_with_nodes_elsewhere_is_warned_about_once():
    open_ = auth.Access("10.0.0.1:6379", requires_token=False)
    assert auth.open_cluster_warning(open_, ["10.0.0.1", "127.0.0.1"], ["10.0.0.1"]) is None  # all on this host
    assert auth.open_cluster_warning(auth.Access("x", True), ["10.0.0.7"], ["10.0.0.1"]) is None
    text = auth.open_cluster_warning(open_, ["10.0.0.1", "10.0.0.7", "10.0.0.8"], ["10.0.0.1"])
    assert text.startswith("the Ray cluster at 10.0.0.1:6379 requires no token, and it has nodes on other hosts ")
    assert "(10.0.0.7, 10.0.0.8)" in text
    fresh = auth.Access(f"10.0.0.1:{uuid.uuid4().int % 60000}", requires_token=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        auth.warn_if_open(fresh, ["10.0.0.7"], ["10.0.0.1"])
        auth.warn_if_open(fresh, ["10.0.0.7"], ["10.0.0.1"])
    assert [w.category for w in caught] == [auth.InsecureClusterWarning]


# -- rlplace stop's bookkeeping, on plain processes --------------------------------------------------------------


def sleeper(marker: str) -> subprocess.Popen:
    env = {**os.environ, local_nodes.MARKER_ENV: marker}
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=env)


def test_stop_ends_the_processes_of_its_records_and_nothing_else(home, capsys):
    mine = local_nodes.new_record("head", "10.0.0.1:6379", None)
    mine.save()
    elsewhere = local_nodes.NodeRecord("b" * 12, "another-host", "node", "10.0.0.1:6379", 0.0)
    elsewhere.save()  # a home directory shared by the nodes of a cluster holds their records too
    ours, other, unrecorded = sleeper(mine.id), sleeper(elsewhere.id), sleeper("c" * 12)
    try:
        assert [pid for pid, _ in local_nodes.marked_processes(local_nodes.MARKER_ENV, mine.id)] == [ours.pid]
        assert main(["stop"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("stopped the head 10.0.0.1:6379 (started ") and f" {ours.pid})" in out, out
        assert ours.wait(timeout=10) == -15  # SIGTERM was enough
        assert other.poll() is None and unrecorded.poll() is None
        assert not mine.path.exists() and elsewhere.path.exists()
        assert main(["stop"]) == 0
        assert capsys.readouterr().out.startswith("nothing to stop: no node started by `rlplace start` is recorded")
    finally:
        for p in (ours, other, unrecorded):
            p.kill()
            p.wait()


def test_stop_forgets_a_node_whose_processes_are_gone(home, capsys):
    local_nodes.new_record("node", "10.0.0.1:6379", None).save()
    assert main(["stop"]) == 0
    assert "already stopped (no process of it was left)" in capsys.readouterr().out
    assert local_nodes.records_here() == []


# -- untrusted token files (issue 27) ----------------------------------------------------------------------------

TOKEN = "0123456789abcdef" * 4  # as long as the one `rlplace start --head` creates


def another_users(path, monkeypatch) -> None:
    """Make `path` belong to another user than this process: as root, give it to nobody; as anyone else, let the
    check believe this process is another uid."""
    if os.getuid() == 0:
        os.chown(path, 65534, 65534, follow_symlinks=False)
    else:
        me = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: me + 1)


def test_a_token_file_another_user_owns_is_refused(home, monkeypatch):
    """A file planted by another user (in /tmp, say) would make the head require the planter's token."""
    planted = write(home / "planted", TOKEN)
    another_users(planted, monkeypatch)
    with pytest.raises(ClusterAccessError, match=rf"--token-file {planted}: {planted} belongs to another user"):
        auth.token_for_head({}, planted)
    with pytest.raises(ClusterAccessError, match="belongs to another user"):
        auth.find_token({"RAY_AUTH_TOKEN_PATH": str(planted)})  # a client presenting it too


def test_a_token_file_everyone_may_write_is_refused_and_the_advice_names_the_real_file(home):
    real = write(home / "secrets" / "token", TOKEN)
    link = home / "token-link"
    link.symlink_to(real)
    real.chmod(0o666)
    with pytest.raises(ClusterAccessError) as e:
        auth.token_for_head({}, link)
    assert str(e.value) == (
        f"--token-file {link}: every user may write the token file {real} (which {link} links to), and so choose the "
        f"token; `chmod 600 {real}`"
    )


def test_the_readable_token_advice_names_the_file_not_the_link(home):
    """`chmod 600 LINK` changes the link's target anyway, but the advice must say which file that is."""
    real = write(home / "secrets" / "token", TOKEN)
    real.chmod(0o644)
    link = home / "token-link"
    link.symlink_to(real)
    token, created = auth.token_for_head({}, link)
    report = start.head_report(auth.Access("10.0.0.1:6379", True, token), created)
    assert f"warning: other users can read {real} (which {link} links to): `chmod 600 {real}`" in report, report


@pytest.mark.parametrize("value", ["x", "short-token"])
def test_a_head_refuses_a_token_shorter_than_32_characters(home, value):
    short = write(home / "short", value)
    with pytest.raises(
        ClusterAccessError, match=rf"the token is {len(value)} characters? long; a head requires at least 32"
    ):
        auth.token_for_head({}, short)
    with pytest.raises(ClusterAccessError, match="a head requires at least 32"):
        auth.token_for_head({"RAY_AUTH_TOKEN": value})
    assert auth.find_token({"RAY_AUTH_TOKEN_PATH": str(short)}).value == value  # a client presents what it holds


def test_a_two_line_token_file_is_read_as_ray_reads_it(home):
    """Ray takes the first line; the whole file as the token crashed every client with exit 134."""
    two = write(home / "two", f"{TOKEN}\nsecond line\nthird\n")
    token = auth.find_token({"RAY_AUTH_TOKEN_PATH": str(two)})
    assert token.value == TOKEN
    assert token.notes == (
        f"$RAY_AUTH_TOKEN_PATH={two}: only the first line of {two} is the token, as Ray reads it; lines 2-3 are "
        "ignored",
    )


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (TOKEN[:10] + "\t" + TOKEN[10:], "character 11 of the token is a control character (U+0009)"),
        (TOKEN + "\u00e9", "character 65 of the token is not ASCII"),
        (TOKEN[:5] + "\n" + TOKEN[5:], "character 6 of the token is a control character (U+000A)"),
    ],
    ids=["tab", "non-ascii", "newline"],
)
def test_a_token_grpc_cannot_carry_is_refused_naming_where(home, value, said):
    with pytest.raises(ClusterAccessError, match=rf"^\$RAY_AUTH_TOKEN: {re.escape(said)}; gRPC carries only"):
        auth.find_token({"RAY_AUTH_TOKEN": value})
    in_file = write(home / "token", value.replace("\n", "") + "\n")
    if "\n" not in value:
        with pytest.raises(ClusterAccessError, match=rf"--token-file {in_file}, line 1: {re.escape(said)}"):
            auth.find_token({}, in_file)


def test_a_token_file_that_is_not_utf8_is_refused(home):
    bad = home / "token"
    bad.write_bytes(TOKEN.encode() + b"\xff\n")
    with pytest.raises(ClusterAccessError, match=r"line 1 of the token file .* is not UTF-8 \(byte 0xff\)"):
        auth.find_token({}, bad)


@pytest.mark.parametrize("kind", ["device", "fifo", "large"])
def test_a_token_file_that_never_ends_or_hangs_is_refused_at_once(home, kind):
    """/dev/zero made the reader take 2.7 GB, a FIFO made it wait forever: in a subprocess with a timeout and a
    memory limit, so that the code before the fix fails this instead of hanging or eating the machine's memory."""
    path = {"device": "/dev/zero", "fifo": str(home / "fifo"), "large": str(home / "large")}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    if kind == "large":
        write(home / "large", "x" * (1 << 20))
    code = f"from pathlib import Path\nfrom rlplace.ray import auth\nauth.find_token({{}}, Path({path!r}))\n"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, preexec_fn=limit_memory
    )
    said = {"device": "is a device, not a regular file", "fifo": "is a FIFO, not a regular file", "large": "KiB"}[kind]
    assert done.returncode == 1 and "ClusterAccessError" in done.stderr and said in done.stderr, done.stderr[-500:]


def limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


# -- untrusted records (issue 27) --------------------------------------------------------------------------------


def crafted_record(name: str, record_id: str):
    """A record file as someone else would write it into ~/.rlplace/started."""
    fields = {"id": record_id, "host": socket.gethostname(), "role": "head", "address": "x", "started_at": 0}
    return write(local_nodes.records_dir() / name, json.dumps(fields))


def test_stop_never_acts_on_a_record_whose_id_names_another_file(home, capsys):
    """`{"id": "../../victim"}` made stop delete ~/victim.json (the review's /tmp/victim.json)."""
    victim = write(home / "victim.json", "{}")
    crafted = crafted_record("evil.json", "../../victim")
    assert main(["stop"]) == 0
    captured = capsys.readouterr()
    assert victim.exists() and crafted.exists()
    assert captured.err == (
        f"warning: ignored {crafted}: its id '../../victim' is not the 12 hex digits of its file name; remove it if "
        "rlplace did not write it\n"
    )
    assert captured.out.startswith("nothing to stop")


def test_a_crafted_record_is_never_acted_on_however_often_stop_runs(home, capsys):
    """A record named for one id but holding another was never forgotten (forget() unlinked the other name), so it
    killed the processes marked with that id on every stop."""
    crafted = crafted_record("a" * 12 + ".json", "b" * 12)
    bystander = sleeper("b" * 12)
    try:
        for _ in range(2):
            assert main(["stop"]) == 0
            assert f"ignored {crafted}: its id 'bbbbbbbbbbbb' is not the 12 hex digits" in capsys.readouterr().err
            assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_records_others_may_write_are_ignored_and_records_are_written_for_their_owner(home, capsys):
    record = local_nodes.new_record("head", "10.0.0.1:6379", None)
    record.save()
    assert stat.S_IMODE(record.path.stat().st_mode) == 0o600
    record.path.chmod(0o666)
    assert local_nodes.records_here() == []
    assert main(["stop"]) == 0
    assert "may be written by other users" in capsys.readouterr().err
    record.path.unlink()
    record.path.symlink_to(home / "elsewhere.json")
    with pytest.raises(RlplaceError, match="is a symbolic link"):
        record.save()
    assert not (home / "elsewhere.json").exists()


# -- issue 36: a config's `ray_address` never receives the user's token ----------------------------------------


@pytest.fixture
def listener():
    """A TCP port on this machine that records who calls it: the address a hostile config would name."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    yield sock
    sock.close()


def called(sock: socket.socket) -> bool:
    try:
        sock.accept()[0].close()
    except BlockingIOError:
        return False
    return True


def hostile_config(tmp_path, sock) -> str:
    job = tmp_path / "job.yaml"
    job.write_text(f"cluster:\n  ray_address: 127.0.0.1:{sock.getsockname()[1]}\n  train_worker_num: 1\n")
    return str(job)


CONNECT_CONFIG = """
import sys, rlplace
try:
    rlplace.connect(sys.argv[1])
except rlplace.ConfigError as e:
    print(e)
"""


def test_a_configs_ray_address_is_never_called_with_the_token(home, tmp_path, listener, monkeypatch, capsys):
    """The review's critical finding: `ray_address` in a config written by someone else made `rlplace run` and
    `rlplace.connect()` call that address with the user's token. Now neither calls it at all; the error says how
    to join it on purpose."""
    write(home / ".ray" / "auth_token", "users-own-token-" + "z" * 32 + "\n")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    job = hostile_config(tmp_path, listener)
    port = listener.getsockname()[1]
    for argv in (["run", job, "--", sys.executable, "-c", "pass"], ["run", job]):  # the user's script; the demo's
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"{job}:2: cluster.ray_address: the config names 127.0.0.1:{port} as the Ray cluster to join" in err
        assert "pass --address" in err and not called(listener)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run([sys.executable, "-c", CONNECT_CONFIG, job], capture_output=True, text=True, env=env)
    assert "cluster.ray_address: the config names" in done.stdout, done.stderr[-2000:]
    assert not called(listener)


def test_a_configs_ray_address_the_user_names_too_is_joined(home, monkeypatch):
    """Naming the same address ($RAY_ADDRESS, --address, connect(address=...)) is the user's own choice."""
    from rlplace.config import load
    from rlplace.ray.join import address_to_join

    spec = load({"cluster": {"ray_address": "10.0.0.9:6379", "train_worker_num": 1}})
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.9:6379")
    assert address_to_join(None, spec) == "auto"
    assert address_to_join("10.0.0.1:6379", spec) == "10.0.0.1:6379"  # what the user passes wins
    monkeypatch.delenv("RAY_ADDRESS")
    assert address_to_join(None, load({"cluster": {"ray_address": "auto", "train_worker_num": 1}})) == "auto"
