"""How fast a whole training config loads and plans, against hydra-core composing the same file.

Usage: python bench/load_speed.py [--repeat 20]

For every whole training config of the framework-shaped corpus (tests/data/frameworks: RLightning primaries
and RLinf-shaped Hydra trees, with the search-path variables set so that hydra-core can compose them), in
the same process:

  hydra-core   initialize_config_dir + compose, the start-up path of the frameworks' @hydra.main entry
               points (version base 1.1, as RLinf's)
  compose only hydra-core's compose inside an already initialized context (its fastest case)
  rlplace      rlplace.config.load(FILE) + rlplace.planner.plan(spec, inventory): YAML with file and line
               for every value, the defaults tree composed, the section checked, every worker placed

Times are the best of --repeat runs (a busy shared machine only slows the others). The ratio printed last is
the total hydra-core time over the total rlplace time. Then the bad inputs of issues 15 and 27, each timed to
its error (they must all answer in under a second, with or without overrides).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import tempfile
import time
import warnings

from rlplace.config import load
from rlplace.errors import RlplaceError
from rlplace.inventory import parse_nodes
from rlplace.planner import plan

CORPUS = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "frameworks"
ROOT = CORPUS.parents[2]
CONFIGS = (
    ("rlightning/conf/train_ppo.yaml", "1x8"),
    ("rlightning/conf/train_async.yaml", "2x4"),
    ("rlightning/conf/train_inline.yaml", "2x4"),
    ("rlightning/conf/train_small_machine.yaml", "1x1"),
    ("rlinf/embodiment/config/maniskill_ppo_openvla.yaml", "1x8"),
    ("rlinf/embodiment/config/realworld_sac_forms.yaml", "2x8"),
    ("rlinf/reasoning/config/math/grpo_megatron.yaml", "2x8"),
    ("rlinf/e2e/embodied/ppo_openvla_e2e.yaml", "1x8"),
    ("rlinf/e2e/reasoning/grpo_model_group.yaml", "1x8"),
)
OVERRIDE = ["cluster.train_worker_num=1"]
ENV = {"CORPUS_EMBODIED_PATH": str(CORPUS / "rlinf" / "embodiment"), "CORPUS_REPO_PATH": str(ROOT)}


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def hydra_startup(path: pathlib.Path) -> None:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(path.parent), version_base="1.1"):
        compose(config_name=path.stem)


def rlplace_load_plan(path: pathlib.Path, nodes: str) -> None:
    plan(load(path), parse_nodes(nodes))


def speed(repeat: int) -> None:
    from hydra import compose, initialize_config_dir

    print(f"{'config':<52} {'hydra-core':>11} {'compose only':>13} {'rlplace':>9} {'ratio':>7}")
    totals = [0.0, 0.0, 0.0]
    for name, nodes in CONFIGS:
        path = CORPUS / name
        hydra = best(lambda p=path: hydra_startup(p), repeat)
        with initialize_config_dir(config_dir=str(path.parent), version_base="1.1"):
            only = best(lambda p=path: compose(config_name=p.stem), repeat)
        ours = best(lambda p=path, n=nodes: rlplace_load_plan(p, n), repeat)
        for i, t in enumerate((hydra, only, ours)):
            totals[i] += t
        print(f"{name:<52} {hydra * 1e3:9.1f}ms {only * 1e3:11.1f}ms {ours * 1e3:7.2f}ms {hydra / ours:6.1f}x")
    hydra, only, ours = totals
    print(
        f"load + plan of {len(CONFIGS)} whole training configs: {ours * 1e3:.1f} ms; hydra-core compose "
        f"{hydra * 1e3:.1f} ms ({only * 1e3:.1f} ms initialized): {hydra / ours:.1f}x faster "
        f"({only / ours:.1f}x against compose alone)"
    )


@contextlib.contextmanager
def bad_inputs():
    """(label, callable) for each bad input of issue 15, in a scratch folder."""
    with tempfile.TemporaryDirectory() as scratch:
        d = pathlib.Path(scratch)
        (d / "adir").mkdir()
        big = d / "big.yaml"
        big.write_text("".join(f"key_{i}: {i}\n" for i in range(400_000)))  # ~7 MB of plain keys, no aliases
        listed = d / "listed.yaml"
        # ~0.9 MB: a 150k-item list beside the cluster section (the case)
        listed.write_text(
            "cluster:\n  train_worker_num: 2\ndataset:\n" + "".join(f"  - {i % 10}\n" for i in range(150_000))
        )
        bomb = d / "bomb.yaml"
        bomb.write_text(
            "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 8))
            + "cluster: {}\n"
        )
        num_nodes = d / "num_nodes.yaml"
        num_nodes.write_text("cluster:\n  num_nodes: 1\n  component_placement:\n    actor: 0-9\n    rollout: 0-7\n")
        sixteen = d / "sixteen.yaml"
        sixteen.write_text("cluster:\n  num_nodes: 16\n  component_placement:\n    actor: all\n")
        tree = d / "tree"  # issue 27: bombs in a defaults group, which an override got past hydra-core's reader
        (tree / "cluster").mkdir(parents=True)
        (tree / "main.yaml").write_text("defaults:\n  - cluster: bomb\n  - _self_\n")
        (tree / "cluster" / "bomb.yaml").write_text(bomb.read_text().replace("cluster: {}\n", "train_worker_num: 1\n"))
        (tree / "cluster" / "big.yaml").write_text(big.read_text())
        ppo = CORPUS / "rlightning" / "conf" / "train_ppo.yaml"
        yield [
            ("plan on a directory", lambda: load(d / "adir")),
            ("a 7 MB file of 400k plain keys", lambda: load(big)),
            ("a 0.9 MB file with a 150k-item list (loads)", lambda: load(listed)),
            ("an alias bomb", lambda: load(bomb)),
            (
                "an override naming an unknown key",
                lambda: load(ppo, overrides=["cluster=1t1e", "cluster.train_worker_nm=3"]),
            ),
            ("an unknown group option", lambda: load(ppo, overrides=["cluster=9t9e"])),
            ("actor 0-9 with num_nodes: 1 on 2x8", lambda: plan(load(num_nodes), parse_nodes("2x8"))),
            ("num_nodes: 16 on 8x8", lambda: plan(load(sixteen), parse_nodes("8x8"))),
            ("an alias bomb in a group file, with an override", lambda: load(tree / "main.yaml", overrides=OVERRIDE)),
            (
                "a 7 MB group file, with an override",
                lambda: load(tree / "main.yaml", overrides=["cluster=big", *OVERRIDE]),
            ),
            ("--nodes 10000000000x8", lambda: parse_nodes("10000000000x8")),
        ]


def errors() -> None:
    print("\nbad input                                          seconds  answer")
    with bad_inputs() as cases:
        for label, call in cases:
            start = time.perf_counter()
            try:
                call()
                answer = "loaded"
            except RlplaceError as e:
                problems = getattr(e, "problems", None)
                answer = " ".join(str(problems[0].message if problems else e).split())[:90]
            print(f"{label:<50} {time.perf_counter() - start:7.2f}  {answer}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    os.environ.update(ENV)
    warnings.simplefilter("ignore")
    speed(args.repeat)
    errors()


if __name__ == "__main__":
    main()
