"""Migration notes: the plan says where it places differently from RLightning, only when this plan differs."""

from __future__ import annotations

import pytest
from tests.planner.specs import auto, manual, r

from rlplace.inventory import parse_nodes
from rlplace.planner import plan


def test_disaggregate_notes_the_idle_gpus_rlightning_would_fill():
    p = plan(auto("disaggregate", train=2, eval=2), parse_nodes("2x4"))
    assert len(p.notes) == 1
    assert "train node 0 keeps 2 GPU(s) idle" in p.notes[0] and "RLightning would put eval/env" in p.notes[0]
    assert not plan(auto("disaggregate", train=4, eval=2), parse_nodes("2x4")).notes  # node 0 full: same layout


def test_manual_counts_left_out_are_one_note_for_train_and_eval():
    spec = manual([{"name": "g", "num_node": 1, "num_gpus": 4, "train": r(0, 3), "eval": r(0, 3), "env": r(0, 3)}])
    (note,) = plan(spec, parse_nodes("1x4")).notes
    assert note.startswith("train_worker_num and eval_worker_num not written") and "(train 4, eval 4)" in note
    assert "env" not in note.split(";")[0].replace("env_", "")  # env counts come from `env:` in RLightning
    written = manual([{"name": "g", "num_node": 1, "num_gpus": 4, "train": r(0, 3)}], counts={"train": 4})
    assert not plan(written, parse_nodes("1x4")).notes


@pytest.mark.parametrize(("nodes", "expect"), [("3x8", "RLightning would make 1"), ("1x4", None)])
def test_buffer_auto_under_default_notes_rlightnings_count_when_it_differs(nodes, expect):
    p = plan(auto("default", buffer="auto", train=2, eval=1), parse_nodes(nodes))
    if expect is None:
        assert not p.notes  # ceil(2 / 4) = 1 shard, as rlplace's one per GPU node
    else:
        assert len(p.notes) == 1 and expect in p.notes[0]


def test_plans_that_agree_with_rlightning_have_no_notes():
    assert not plan(auto("colocate", "device-colocate", train=4, eval=4), parse_nodes("1x4")).notes
    assert not plan(auto("default", buffer=1), parse_nodes("2x4")).notes
