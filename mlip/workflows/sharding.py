"""Large evaluations split over processes, resumable item by item.

A campaign (κ for a hundred crystals, relaxing thousands of candidates) is a list of items with
unique ids. :func:`run_sharded` gives each process its share (:func:`shard_items`, balanced by
cost, e.g. atom count), computes the items of that share that have no result yet, and writes each
result as soon as it is known to ``out_dir/results/<id>.json`` (atomically). A crash loses at most
the item in progress; a rerun skips what is finished; a failing item is recorded with its error
and never stops the run. :func:`load_results` gathers every shard's results for merging.

The shard of this process comes from explicit arguments, else from a Slurm job array
(``SLURM_ARRAY_TASK_ID``/``SLURM_ARRAY_TASK_COUNT``), else from a ``torchrun`` launch
(``RANK``/``WORLD_SIZE``), else it is the whole list (:func:`shard_from_environment`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from mlip.io import atomic_write


def shard_from_environment(
    n_shards: Optional[int] = None, shard_index: Optional[int] = None, environ: Optional[dict] = None
) -> Tuple[int, int]:
    """(n_shards, shard_index) of this process.

    Explicit values win; otherwise a Slurm array (``SLURM_ARRAY_TASK_COUNT`` and the task id
    relative to ``SLURM_ARRAY_TASK_MIN``), then torchrun (``WORLD_SIZE``, ``RANK``), then (1, 0).
    """
    env = os.environ if environ is None else environ
    if n_shards is None and shard_index is None:
        if "SLURM_ARRAY_TASK_ID" in env and "SLURM_ARRAY_TASK_COUNT" in env:
            n_shards = int(env["SLURM_ARRAY_TASK_COUNT"])
            shard_index = int(env["SLURM_ARRAY_TASK_ID"]) - int(env.get("SLURM_ARRAY_TASK_MIN", 0))
        elif "WORLD_SIZE" in env and "RANK" in env:
            n_shards, shard_index = int(env["WORLD_SIZE"]), int(env["RANK"])
        else:
            n_shards, shard_index = 1, 0
    elif n_shards is None or shard_index is None:
        raise ValueError("give both the number of shards and the shard index, or neither")
    if n_shards < 1 or not 0 <= shard_index < n_shards:
        raise ValueError(f"shard index must be in [0, {n_shards}) with at least one shard, got {shard_index}")
    return int(n_shards), int(shard_index)


def shard_items(costs: Sequence[float], n_shards: int, shard_index: int) -> List[int]:
    """Indices of the items that belong to ``shard_index``, balancing the total cost per shard.

    Greedy longest-processing-time assignment (largest cost first to the least-loaded shard, ties to
    the lower shard and the lower index): deterministic, so every process computes the same split.
    Returns the indices in their original order.
    """
    if n_shards < 1 or not 0 <= shard_index < n_shards:
        raise ValueError(f"shard index must be in [0, {n_shards}), got {shard_index}")
    loads = [0.0] * n_shards
    owner = [0] * len(costs)
    for k in sorted(range(len(costs)), key=lambda i: (-float(costs[i]), i)):
        s = min(range(n_shards), key=lambda j: (loads[j], j))
        owner[k] = s
        loads[s] += float(costs[k])
    return [k for k in range(len(costs)) if owner[k] == shard_index]


_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def result_path(out_dir: Union[str, Path], item_id: str) -> Path:
    """Where the result of ``item_id`` is stored (the id made filesystem-safe, plus a hash of the
    original when characters had to be replaced, so distinct ids never share a file)."""
    item_id = str(item_id)
    name = _SAFE.sub("_", item_id)
    if name != item_id:
        name += "-" + hashlib.sha1(item_id.encode()).hexdigest()[:10]
    return Path(out_dir) / "results" / (name + ".json")


def read_result(out_dir: Union[str, Path], item_id: str) -> Optional[dict]:
    """The stored result of ``item_id`` (None when absent or unreadable)."""
    path = result_path(out_dir, item_id)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("id") == str(item_id) else None


def write_result(out_dir: Union[str, Path], item_id: str, record: Dict[str, Any]) -> Path:
    """Store ``record`` for ``item_id`` atomically (``id`` is added to it)."""
    record = {"id": str(item_id), **record}
    text = json.dumps(record, allow_nan=True)
    path = result_path(out_dir, item_id)
    atomic_write(path, lambda tmp: Path(tmp).write_text(text))
    return path


def pending_items(
    ids: Sequence[str],
    out_dir: Union[str, Path],
    costs: Optional[Sequence[float]] = None,
    n_shards: Optional[int] = None,
    shard_index: Optional[int] = None,
) -> Tuple[List[int], Dict[str, int]]:
    """The indices of the items of this process's shard (see :func:`run_sharded`) that have no result
    in ``out_dir`` yet, in order, and the counts ``{"shard", "n_shards", "assigned", "skipped",
    "computed": 0, "failed": 0}`` for a driver of its own to update. ValueError for repeated ids."""
    ids = [str(i) for i in ids]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"item ids must be unique; repeated: {', '.join(dup[:5])}")
    n_shards, shard_index = shard_from_environment(n_shards, shard_index)
    costs = [1.0] * len(ids) if costs is None else list(costs)
    if len(costs) != len(ids):
        raise ValueError(f"{len(costs)} costs for {len(ids)} items")
    mine = shard_items(costs, n_shards, shard_index)
    todo = [k for k in mine if read_result(out_dir, ids[k]) is None]
    counts = {"shard": shard_index, "n_shards": n_shards, "assigned": len(mine),
              "skipped": len(mine) - len(todo), "computed": 0, "failed": 0}
    return todo, counts


def run_sharded(
    items: Sequence[Tuple[str, Any]],
    compute: Callable[[str, Any], Dict[str, Any]],
    out_dir: Union[str, Path],
    costs: Optional[Sequence[float]] = None,
    n_shards: Optional[int] = None,
    shard_index: Optional[int] = None,
    progress: bool = True,
    desc: str = "items",
    write: bool = True,
    report_every: float = 60.0,
) -> Dict[str, int]:
    """Compute this process's share of ``items`` = [(id, payload), ...] with ``compute(id, payload)``.

    ``compute`` returns a JSON-serialisable dict; an exception is recorded as
    ``{"failed": True, "error": "...", "traceback": "..."}`` and the run goes on. Results already
    in ``out_dir`` are skipped. ``write=False`` computes without writing: the other ranks of an MPI
    calculation whose rank 0 writes (every rank must take part in each item). Without ``progress``,
    the writing process reports on stderr instead, one line at most every ``report_every`` seconds
    and one when its share is done (a campaign of hours in a log file). Returns counts:
    ``{"shard": k, "n_shards": n, "assigned", "skipped", "computed", "failed"}``.
    """
    ids = [str(i) for i, _ in items]
    todo, counts = pending_items(ids, out_dir, costs, n_shards, shard_index)
    bar = None
    if progress and todo:
        from tqdm.auto import tqdm

        bar = tqdm(total=counts["assigned"], initial=counts["skipped"],
                   desc=f"{desc} (shard {counts['shard'] + 1}/{counts['n_shards']})",
                   unit="item", dynamic_ncols=True)
    report = write and not progress and bool(todo)
    start = last_report = time.perf_counter()
    try:
        for k in todo:
            item_id, payload = items[k]
            t0 = time.perf_counter()
            try:
                record = dict(compute(ids[k], payload))
            except KeyboardInterrupt:
                raise
            except Exception as err:  # recorded, never fatal for the campaign
                record = {"failed": True, "error": f"{type(err).__name__}: {err}",
                          "traceback": traceback.format_exc()}
                counts["failed"] += 1
            record.setdefault("wall_time_s", time.perf_counter() - t0)
            if write:
                write_result(out_dir, ids[k], record)
            counts["computed"] += 1
            now = time.perf_counter()
            per_min = counts["computed"] / max((now - start) / 60, 1e-9)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(per_min=f"{per_min:.1f}", failed=counts["failed"], refresh=False)
            if report and (now - last_report >= report_every or counts["computed"] == len(todo)):
                last_report = now
                print(f"{desc} (shard {counts['shard'] + 1}/{counts['n_shards']}): "
                      f"{counts['skipped'] + counts['computed']}/{counts['assigned']} done, "
                      f"{counts['failed']} failed this run, {per_min:.1f} per min; "
                      f"last {ids[k]} in {record['wall_time_s']:.0f} s", file=sys.stderr, flush=True)
    finally:
        if bar is not None:
            bar.close()
    return counts


def load_results(out_dir: Union[str, Path], ids: Optional[Iterable[str]] = None) -> Dict[str, dict]:
    """All stored results (or those of ``ids``; missing ones are left out), keyed by id."""
    if ids is not None:
        out = {}
        for item_id in ids:
            record = read_result(out_dir, item_id)
            if record is not None:
                out[str(item_id)] = record
        return out
    out = {}
    for path in sorted((Path(out_dir) / "results").glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and "id" in record:
            out[record["id"]] = record
    return out


__all__ = [
    "load_results",
    "pending_items",
    "read_result",
    "result_path",
    "run_sharded",
    "shard_from_environment",
    "shard_items",
    "write_result",
]
