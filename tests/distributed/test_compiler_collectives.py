"""Compiler collectives (issue 10 part 7): two gloo ranks on localhost, each seeing a different
batch size, compile the same graphs with the same guards and train to the end (DDP-style
all_reduce of the gradients), matching eager on every rank."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch.distributed as dist

from ember.distributed.collectives import merge_sizes, merge_values

JOB = os.path.join(os.path.dirname(__file__), "collectives_job.py")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run_ranks(tmp_path, mode: str) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, JOB, str(tmp_path), mode], env=env, capture_output=True,
                          text=True, timeout=300)
    written = all((tmp_path / f"rank{r}.json").exists() for r in (0, 1))
    # (each rank writes its results before leaving: a teardown-time abort after that is gloo's)
    assert proc.returncode == 0 or written, proc.stderr[-3000:]
    return [json.load(open(tmp_path / f"rank{r}.json")) for r in (0, 1)]


def _guards(result) -> list:
    # (object addresses differ between processes)
    return [[re.sub(r"0x[0-9a-f]+", "0x", g) for g in entry] for entry in result["guards"]]


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available in this build")
def test_ranks_with_different_batch_sizes_compile_the_same_graph(tmp_path):
    r0, r1 = _run_ranks(tmp_path, "on")
    for r in (r0, r1):
        assert r["matches"] and r["params_equal_eager"]
        assert r["stats"]["fallbacks"] == 0 and r["stats"]["recompiles"] == 0
        assert any("L['x'].size()[0]" in g for g in r["guards"][0])  # the batch is a symbol
    assert r0["stats"] == r1["stats"]
    assert r0["graphs"][-1] == r1["graphs"][-1]
    assert _guards(r0) == _guards(r1)


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available in this build")
def test_without_collectives_the_ranks_specialise_differently(tmp_path):
    r0, r1 = _run_ranks(tmp_path, "off")
    assert r0["matches"] and r1["matches"]
    assert _guards(r0) != _guards(r1)  # each rank's static graph guards its own batch size


def test_merge_is_the_union_of_changes():
    assert merge_sizes([{"x": (4, 3), "w": (3, 3)}, {"x": (5, 3), "w": (3, 3)}]) == {"x": (None, 3), "w": (3, 3)}
    assert merge_sizes([{"x": (4, 3)}, {"x": None}]) == {"x": None}
    assert merge_sizes([{"x": (4, None)}, {"x": (4, 3)}, {"y": (2,)}]) == {"x": (4, None), "y": (2,)}
    assert merge_values([{"n": 3, "lr": 0.1}, {"n": 3, "lr": 0.2}]) == {"n": 3, "lr": None}
    assert merge_values([{"n": 1}, {"n": True}]) == {"n": None}
