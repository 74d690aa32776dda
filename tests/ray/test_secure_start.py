"""Secure by default (issue 19): a cluster started with `rlplace start --head` lets in only those who hold its token.

Real Ray processes on this machine (tests/real_heads.py: loopback, free ports, private Ray temp dirs and HOMEs,
every process stopped by pid). Clients and nodes run in subprocesses, as a user runs them. Not marked `ray`: nothing
here uses the session's simulated cluster, so `make test` runs these beside the tests that do. The error catalogue's
rows on the secured head are provoked here too, so that one secured head serves them all (pytest-xdist keeps a
file's tests on one worker). Measured on the loaded 2-core
machine: the secured head starts in 6-19 s (once per session), a refusal takes 0.7-2 s on a quiet machine (mostly
importing Ray), up to 7 s under load; the module takes about a minute.
"""

from __future__ import annotations

import pathlib
import re
import stat
import sys

import pytest
from tests.docs.test_error_catalogue import ON_SECURED_HEAD, assert_prints_as_quoted

import real_heads
from real_heads import RLPLACE
from rlplace.commands import local_nodes
from rlplace.examples.cartpole_ppo import CONFIGS
from rlplace.ray.labels import LOOPBACK_ENV

#: The issue's bound on a refusal.
FAST_S = 10.0
CONFIG = str(CONFIGS / "default.yaml")  # 5 GPU workers and a buffer: fits the heads' 8 logical GPUs

#: A driver as a user writes one: connect, launch a worker, call it; an RlplaceError is printed, not raised.
CONNECT = """
import sys, rlplace
class Echo:
    def ping(self):
        return "pong"
try:
    with rlplace.connect(sys.argv[1], address=sys.argv[2] or None, export_path=None, timeout_s=60) as job:
        print(job.launch("train", Echo).call("ping"))
except rlplace.RlplaceError as e:
    print(type(e).__name__, "ConnectionError" if isinstance(e, ConnectionError) else "", e)
"""

#: A plain Ray client (no rlplace): one connection attempt instead of Ray's 20, then a task.
PLAIN_RAY = """
import sys, ray
try:
    ray.init(address=sys.argv[1], logging_level="ERROR")
    print("ran a task:", ray.get(ray.remote(lambda: 42).remote(), timeout=60))
except ConnectionError as e:
    print("refused:", e)
"""


def clients(address: str) -> dict[str, list[str]]:
    """Every way rlplace reaches a cluster: status, plan (the live inventory), run, and the Python API."""
    return {
        "status": [RLPLACE, "status", "--address", address],
        "plan": [RLPLACE, "plan", CONFIG],  # live inventory: the address comes from $RAY_ADDRESS
        "run": [RLPLACE, "run", CONFIG, "--address", address, "--iterations", "1"],
        "connect": [sys.executable, "-c", CONNECT, CONFIG, address],
    }


def test_the_head_requires_a_token_written_for_its_owner_only_and_never_printed(secured_head):
    token = secured_head.token_file
    assert stat.S_IMODE(token.stat().st_mode) == 0o600 and stat.S_IMODE(token.parent.stat().st_mode) == 0o700
    value = token.read_text()
    assert len(value) == 64 and value not in secured_head.output
    assert "requires its token" in secured_head.output
    assert f"--node-rank N --token-file {token}" in secured_head.output  # the join command names the file
    assert f"RAY_AUTH_TOKEN_PATH={token} rlplace status" in secured_head.output
    names = {name for _, name in secured_head.processes()}
    assert {"raylet", "gcs_server"} <= names
    (record,) = real_heads.records_dir(secured_head.home).glob("*.json")
    assert '"role": "head"' in record.read_text()


@pytest.mark.parametrize("client", ["status", "plan", "run", "connect"])
def test_a_client_without_the_token_is_refused_within_seconds_naming_where_it_looked(secured_head, client, tmp_path):
    argv = clients(secured_head.address)[client]
    done, seconds = real_heads.run(argv, tmp_path, RAY_ADDRESS=secured_head.address)
    out = done.stdout + done.stderr
    assert seconds < FAST_S, f"took {seconds:.1f} s"
    looked = "requires a token and none was found: looked at $RAY_AUTH_TOKEN (unset), $RAY_AUTH_TOKEN_PATH (unset), "
    assert f"{looked}{tmp_path}/.ray/auth_token (no such file)" in out, out
    assert "Traceback" not in out and "gcs_client" not in out  # no Ray log line either
    if client == "connect":
        assert out.startswith("ClusterAccessError ConnectionError the Ray cluster at "), out
    else:
        assert done.returncode == 1 and out.startswith("error: the Ray cluster at "), out


@pytest.mark.parametrize("client", ["status", "connect"])
def test_a_wrong_token_is_refused_naming_its_source(secured_head, client, tmp_path):
    wrong = tmp_path / "wrong_token"
    wrong.write_text("0" * 64)
    argv = clients(secured_head.address)[client]
    done, seconds = real_heads.run(argv, tmp_path, RAY_AUTH_TOKEN_PATH=str(wrong))
    out = done.stdout + done.stderr
    assert seconds < FAST_S, f"took {seconds:.1f} s"
    assert f"refused the token from $RAY_AUTH_TOKEN_PATH={wrong}: it is not this cluster's token" in out, out
    assert "Traceback" not in out


@pytest.mark.parametrize("token", ["none", "wrong"])
def test_ray_itself_refuses_a_client_without_the_token(secured_head, token, tmp_path):
    """The cluster is closed, not only rlplace's front door: a plain Ray client cannot run a task. (One connection
    attempt: RAY_gcs_server_port_wait_time_s=1; Ray's default makes 20, 20 s.)"""
    wrong = tmp_path / "wrong_token"
    wrong.write_text("0" * 64)
    env = {"RAY_gcs_server_port_wait_time_s": "1"}
    if token == "wrong":
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(wrong))
    done, _ = real_heads.run([sys.executable, "-c", PLAIN_RAY, secured_head.address], tmp_path, **env)
    assert "refused: Failed to connect to Ray cluster" in done.stdout, done.stdout + done.stderr[-2000:]
    assert "ran a task" not in done.stdout


@pytest.mark.slow
def test_a_client_holding_the_token_gets_in(secured_head, tmp_path):
    """status, plan and drivers that launch a worker (the address given to `connect`, or the config's
    `ray_address`), with the token from $RAY_AUTH_TOKEN_PATH; status also with the token at ~/.ray/auth_token,
    where Ray looks last. 9 s on a quiet machine, 25 s under load."""
    token = {"RAY_AUTH_TOKEN_PATH": str(secured_head.token_file), "RAY_ADDRESS": secured_head.address}
    argv = clients(secured_head.address)
    status, _ = real_heads.run(argv["status"], tmp_path, **token)
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith("cluster ") and "requires a token (Ray token authentication); this process " in (
        status.stdout
    )
    planned, _ = real_heads.run(argv["plan"], tmp_path, **token)
    assert planned.returncode == 0 and "5 GPU(s) used, 3 idle" in planned.stdout, planned.stderr  # the head's 8
    driver, _ = real_heads.run(argv["connect"], tmp_path, **token)
    assert driver.stdout.strip().splitlines()[-1] == "['pong']", driver.stdout + driver.stderr[-2000:]
    configured = tmp_path / "job.yaml"  # RLightning's key: where to connect, in the config
    text = pathlib.Path(CONFIG).read_text()
    configured.write_text(text.replace("cluster:\n", f"cluster:\n  ray_address: {secured_head.address}\n", 1))
    driver, _ = real_heads.run([sys.executable, "-c", CONNECT, str(configured), ""], tmp_path, **token)
    assert driver.stdout.strip().splitlines()[-1] == "['pong']", driver.stdout + driver.stderr[-2000:]
    at_home, _ = real_heads.run(argv["status"], secured_head.home)
    assert at_home.returncode == 0 and f"from {secured_head.token_file}" in at_home.stdout, at_home.stderr


@pytest.mark.slow
@pytest.mark.long
def test_rlplace_run_with_the_token_trains_as_before(secured_head, tmp_path):
    """`rlplace run CONFIG --address HEAD` on the secured head, the token from $RAY_AUTH_TOKEN_PATH: 7 s on a quiet
    machine, 11-19 s under load. `make test-long` only: the pipeline's workers import torch; `run --address` with the
    token is the next test's, with a script of one's own."""
    argv = [*clients(secured_head.address)["run"], "--out", str(tmp_path)]
    done, _ = real_heads.run(argv, tmp_path, timeout=600, RAY_AUTH_TOKEN_PATH=str(secured_head.token_file))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Where each worker ran" in done.stdout


#: The user's own script for `rlplace run ... -- python my_train.py`: connect() with no argument, its own actor class.
MY_TRAIN = """
import os, sys, rlplace
class Learner:
    def where(self):
        return f"train {rlplace.worker_placement().rank} on node {rlplace.worker_placement().node_rank}"
with rlplace.connect() as job:
    print(*job.launch("train", Learner).call("where"), sep="\\n")
print("mode", os.environ["RAY_AUTH_MODE"])
sys.exit(int(sys.argv[1]))
"""


def test_rlplace_run_runs_the_users_script_on_the_secured_head(secured_head, tmp_path):
    """`rlplace run CONFIG --address HEAD -- python my_train.py` (the token from the head's file, in
    $RAY_AUTH_TOKEN_PATH): the script joins with `rlplace.connect()`, launches its own class on the plan and its exit
    code (4: not 0, so that passing it on shows) is run's; its job is gone afterwards. 4 s on a quiet machine."""
    code = 4
    (tmp_path / "my_train.py").write_text(MY_TRAIN)
    (tmp_path / "job.yaml").write_text("cluster:\n  num_nodes: 1\n  component_placement: {train: 0-1}\n")
    where = ["--address", secured_head.address]
    argv = [RLPLACE, "run", str(tmp_path / "job.yaml"), *where, "--", sys.executable, str(tmp_path / "my_train.py")]
    argv.append(str(code))
    token = {"RAY_AUTH_TOKEN_PATH": str(secured_head.token_file)}
    done, _ = real_heads.run(argv, tmp_path, timeout=300, **token)
    assert done.returncode == code, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["train 0 on node 0", "train 1 on node 0", "mode token"], done.stderr[-3000:]
    port = secured_head.address.rsplit(":", 1)[1]  # Ray names the head by this machine's IP, not 127.0.0.1
    assert re.search(rf"planning on the live Ray cluster at \S+:{port}: 1 node", done.stderr), done.stderr
    status, _ = real_heads.run([RLPLACE, "status", "--address", secured_head.address], tmp_path, **token)
    assert "no rlplace workers" in status.stdout, status.stdout + status.stderr


@pytest.mark.parametrize("token", ["none", "wrong"])
def test_a_node_without_the_token_is_refused_within_seconds_and_nothing_is_left(secured_head, token, tmp_path):
    wrong = tmp_path / "wrong_token"
    wrong.write_text("0" * 64)
    flags = ["--node-rank", "1", *(["--token-file", str(wrong)] if token == "wrong" else [])]
    node = real_heads.start(tmp_path, *flags, address=secured_head.address)
    try:
        assert node.seconds < FAST_S, f"took {node.seconds:.1f} s"
        assert node.returncode == 1 and "Traceback" not in node.output, node.output
        if token == "none":
            assert "requires a token and none was found: looked at $RAY_AUTH_TOKEN (unset)" in node.output
            assert "pass --token-file FILE" in node.output
        else:
            assert f"refused the token from --token-file {wrong}" in node.output, node.output
        assert node.processes() == []  # no raylet, nothing: every process of the attempt carries its mark
        assert not list(real_heads.records_dir(tmp_path).glob("*.json"))
    finally:
        real_heads.kill_marked(node)


@pytest.mark.slow
def test_a_node_with_the_token_joins_and_rlplace_stop_ends_that_node_only(secured_head, tmp_path):
    """A node joins with the head's token file; `rlplace stop` on it (its HOME) ends its processes and leaves the
    head (another `rlplace start`, another HOME) running. 10 s (start 7 s, stop 3 s), up to
    13 s under load."""
    node = real_heads.start(
        tmp_path, "--node-rank", "1", "--token-file", str(secured_head.token_file), address=(secured_head.address)
    )
    try:
        assert node.returncode == 0, node.output
        presented = f"requires a token; this node presents the one from --token-file {secured_head.token_file}"
        assert presented in node.output
        mine = node.processes()
        assert "raylet" in {name for _, name in mine}
        others = secured_head.processes()
        stopped, _ = real_heads.run([RLPLACE, "stop"], tmp_path)
        assert stopped.returncode == 0 and "stopped the node of the cluster at" in stopped.stdout, stopped.stderr
        assert not [p for p in mine if alive(p[0])]
        assert [p for p in others if not alive(p[0])] == []
    finally:
        real_heads.kill_marked(node)


@pytest.mark.slow
def test_an_insecure_head_is_open_says_so_and_stop_leaves_the_others(secured_head, tmp_path):
    """`--insecure`: no token file, a warning saying what it allows, a client without token gets in, `status`
    says OPEN; `rlplace stop` ends it and leaves the secured head (another cluster on this machine) running. 9 s on
    a quiet machine, 12 s under load."""
    head = real_heads.start(tmp_path, "--insecure", "--node-rank", "0", cpus=2, gpus=0)
    try:
        assert head.returncode == 0, head.output
        assert "warning: --insecure: the Ray cluster at" in head.output and "run any code on every node" in head.output
        assert not (tmp_path / ".ray").exists()
        status, _ = real_heads.run([RLPLACE, "status", "--address", head.address], tmp_path)
        assert status.returncode == 0 and " is OPEN: it requires no token" in status.stdout, status.stderr
        mine = head.processes()
        others = secured_head.processes()
        stopped, _ = real_heads.run([RLPLACE, "stop"], tmp_path)
        assert stopped.returncode == 0 and "stopped the head" in stopped.stdout, stopped.stderr
        assert not [p for p in mine if alive(p[0])]
        assert [p for p in others if not alive(p[0])] == []
    finally:
        real_heads.kill_marked(head)


def alive(pid: int) -> bool:
    return local_nodes.running(pid)


def listening(processes: list[tuple[int, str]]) -> dict[str, set[str]]:
    """The addresses each of `processes` (by name) accepts TCP connections on."""
    import psutil

    found: dict[str, set[str]] = {}
    for pid, name in processes:
        try:
            sockets = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.Error:
            continue
        found.setdefault(name, set()).update(s.laddr.ip for s in sockets if s.status == psutil.CONN_LISTEN)
    return found


def test_a_head_on_127_0_0_1_listens_there_only_and_says_how_to_stop_it(tmp_path):
    """`rlplace start --head -- --node-ip-address 127.0.0.1`: Ray 2.60 alone turns 127.0.0.1 into this machine's
    address and its GCS and raylet listen on every address; rlplace keeps it on loopback (Ray's one-machine mode).
    Its report, after Ray's own lines, says `rlplace stop`, and Ray's `ray stop` advice is not printed. A client of
    this machine without Ray's switch is told to set it. 5-10 s."""
    head = real_heads.start(
        tmp_path, "--insecure", "--node-rank", "0", cpus=1, gpus=0, ray_args=("--node-ip-address=127.0.0.1",)
    )
    try:
        assert head.returncode == 0, head.output
        servers = listening(head.processes())
        assert servers["gcs_server"] and servers["raylet"], servers
        assert set().union(*servers.values()) <= {"127.0.0.1", "::ffff:127.0.0.1"}, servers
        assert f"the Ray cluster at {head.address} listens on 127.0.0.1 only" in head.output
        assert "ray stop\n" not in head.output and "To terminate the Ray runtime" not in head.output
        assert head.output.index("Ray runtime started") < head.output.index("Stop this node: rlplace stop (not")
        done, _ = real_heads.run([RLPLACE, "status", "--address", head.address], tmp_path)
        assert "the head listens on 127.0.0.1 only (--node-ip-address 127.0.0.1): set " in done.stderr, done.stderr
        done, _ = real_heads.run([RLPLACE, "status", "--address", head.address], tmp_path, **{LOOPBACK_ENV: "0"})
        assert done.returncode == 0 and "no rlplace workers" in done.stdout, done.stdout + done.stderr
    finally:
        real_heads.kill_marked(head)


@pytest.mark.parametrize("case", ["two-lines", "tab", "non-ascii"])
def test_a_token_grpc_cannot_carry_is_a_message_not_an_abort(secured_head, case, tmp_path):
    """A token file with a second line, or $RAY_AUTH_TOKEN with a control or non-ASCII character, made `status`,
    `plan` and `start --address` die with exit 134 (gRPC "Illegal header value") and no message (issue 27). Ray uses
    a file's first line: so does rlplace, and says the rest is ignored; a character gRPC refuses is named."""
    token = secured_head.token_file.read_text().strip()
    if case == "two-lines":
        two = tmp_path / "two_lines"
        two.write_text(f"{token}\nsecond line\n")
        env = {"RAY_AUTH_TOKEN_PATH": str(two)}
    else:
        env = {"RAY_AUTH_TOKEN": token[:10] + ("\t" if case == "tab" else "\u00e9") + token[10:]}
    status, seconds = real_heads.run([RLPLACE, "status", "--address", secured_head.address], tmp_path, **env)
    out = status.stdout + status.stderr
    assert status.returncode != -6 and "Traceback" not in out and seconds < FAST_S, out
    if case == "two-lines":
        assert status.returncode == 0 and "requires a token (Ray token authentication); this process holds it" in out
        assert f"warning: $RAY_AUTH_TOKEN_PATH={two}: only the first line of {two} is the token" in out, out
    else:
        kind = "a control character (U+0009)" if case == "tab" else "not ASCII"
        assert status.returncode == 1 and f"error: $RAY_AUTH_TOKEN: character 11 of the token is {kind}" in out, out
        bad = tmp_path / "bad_token"
        bad.write_text(env["RAY_AUTH_TOKEN"])
        node = real_heads.start(tmp_path, "--node-rank", "1", "--token-file", str(bad), address=secured_head.address)
        try:
            assert node.returncode == 1 and f"--token-file {bad}, line 1: character 11 of the token is {kind}" in (
                node.output
            ), node.output
            assert node.processes() == []
        finally:
            real_heads.kill_marked(node)


@pytest.mark.parametrize("quote", ON_SECURED_HEAD, ids=lambda q: q[:60])
def test_the_error_catalogue_quotes_what_a_client_of_the_secured_head_is_told(quote, request):
    """docs/errors.md's rows on the secured head (tests/docs/test_error_catalogue.py provokes every other row)."""
    assert_prints_as_quoted(quote, request)
