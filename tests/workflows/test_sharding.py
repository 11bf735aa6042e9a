"""Sharded, resumable campaigns (mlip.workflows.sharding)."""

import json

import pytest

from mlip.workflows.sharding import (
    load_results,
    result_path,
    run_sharded,
    shard_from_environment,
    shard_items,
)


def test_shards_partition_the_items_and_balance_the_cost():
    costs = [64, 2, 2, 8, 32, 4, 16, 1, 1, 30, 7, 5]
    shards = [shard_items(costs, 3, k) for k in range(3)]
    assert sorted(sum(shards, [])) == list(range(len(costs)))  # every item exactly once
    loads = [sum(costs[i] for i in s) for s in shards]
    # Greedy LPT: no shard exceeds the ideal share by more than the largest item.
    assert max(loads) - sum(costs) / 3 <= max(costs)
    assert max(loads) == 64  # the 64-atom item alone, the rest shared out below it
    assert shard_items(costs, 3, 1) == shards[1]  # deterministic


@pytest.mark.parametrize("env, expected", [
    ({}, (1, 0)),
    ({"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "5"}, (4, 2)),
    ({"WORLD_SIZE": "3", "RANK": "2"}, (3, 2)),
])
def test_shard_from_environment(env, expected):
    assert shard_from_environment(environ=env) == expected
    assert shard_from_environment(5, 4, environ=env) == (5, 4)  # explicit values win


def test_bad_shard_arguments():
    with pytest.raises(ValueError, match="shard index"):
        shard_from_environment(2, 2, environ={})
    with pytest.raises(ValueError, match="both"):
        shard_from_environment(2, None, environ={})


def square(item_id, x):
    if x == 3:
        raise ValueError("three is not allowed")
    return {"value": x * x}


def test_run_resume_failure_and_two_shards(tmp_path):
    items = [(f"mp-{k}", k) for k in range(6)]
    # A run interrupted after two items keeps them; the rerun computes only the rest.
    calls = []

    def interrupted(item_id, x):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(item_id)
        return square(item_id, x)

    with pytest.raises(KeyboardInterrupt):
        run_sharded(items, interrupted, tmp_path / "a", progress=False)
    counts = run_sharded(items, square, tmp_path / "a", progress=False)
    assert counts["skipped"] == 2 and counts["computed"] == 4 and counts["failed"] == 1
    one = load_results(tmp_path / "a")
    assert one["mp-3"]["failed"] and "three is not allowed" in one["mp-3"]["error"]
    assert one["mp-5"]["value"] == 25
    # Two shards together give the same results as one process.
    for k in range(2):
        run_sharded(items, square, tmp_path / "b", costs=[1, 5, 2, 2, 8, 1], n_shards=2, shard_index=k,
                    progress=False)
    two = load_results(tmp_path / "b")
    strip = lambda d: {k: {f: v for f, v in r.items() if f not in ("wall_time_s", "traceback")} for k, r in d.items()}
    assert strip(one) == strip(two)


def test_result_files_are_json_and_ids_stay_distinct(tmp_path):
    assert result_path(tmp_path, "a/b") != result_path(tmp_path, "a_b")
    run_sharded([("a/b", 1), ("a_b", 2)], square, tmp_path, progress=False)
    assert {k: r["value"] for k, r in load_results(tmp_path).items()} == {"a/b": 1, "a_b": 4}
    json.loads(result_path(tmp_path, "a/b").read_text())
    with pytest.raises(ValueError, match="unique"):
        run_sharded([("x", 1), ("x", 2)], square, tmp_path, progress=False)


def test_without_progress_bar_the_writer_reports_on_stderr(tmp_path, capsys):
    items = [(f"mp-{k}", k) for k in range(5)]
    run_sharded(items[:2], square, tmp_path, progress=False)
    capsys.readouterr()
    # every item reported (no minimum interval), counting those done by the earlier run
    run_sharded(items, square, tmp_path, progress=False, desc="squares", report_every=0)
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert [line.split(":")[1].split(" done")[0].strip() for line in lines] == ["3/5", "4/5", "5/5"]
    assert lines[0].startswith("squares (shard 1/1)") and "last mp-2 in" in lines[0]
    assert "1 failed this run" in lines[1] and "last mp-4" in lines[2]
    # a long interval: one line, when the share is done; a rank that does not write says nothing
    run_sharded(items, square, tmp_path / "b", progress=False, report_every=3600)
    assert len(capsys.readouterr().err.splitlines()) == 1
    run_sharded(items, square, tmp_path / "c", progress=False, write=False, report_every=0)
    assert capsys.readouterr().err == ""
