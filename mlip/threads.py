"""How many CPU threads a command gives torch: the cores this process may use, less those others keep busy.

torch's default is one thread per core of the machine. Two things make that wrong: a process confined to
fewer cores (``taskset``, a container's CPU quota) still gets one thread per core of the host, and on a
machine that other jobs keep busy, threads that wait for one another at every operation lose far more
than the extra core gives (MD on a loaded 2-core machine ran 6× slower with 2 threads than with 1,
README). :func:`default_threads` takes the cores the process may use (affinity and cgroup quota) less
those other processes keep busy (:func:`busy_cores`), at least one. ``OMP_NUM_THREADS``, when set, wins:
the user chose.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Optional


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity, bounded by a cgroup CPU quota (v2
    ``cpu.max`` or v1 ``cpu.cfs_quota_us``) where one is set; at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> Optional[float]:
    """The CPU quota of this process's cgroup in cores (quota / period), or None where there is none."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota <= 0 or period <= 0 else quota / period
    except (OSError, ValueError):
        return None


def busy_cores(loadavg: Path = Path("/proc/loadavg")) -> float:
    """How many cores other processes keep busy: the smaller of the 1-minute load average and the tasks
    runnable now less this one (``/proc/loadavg``). The average alone still counts a run that has just
    ended (a script of commands would see its own last one); the snapshot alone counts a passing
    process. 0 where neither is known."""
    try:
        fields = loadavg.read_text().split()
        return max(0.0, min(float(fields[0]), float(fields[3].split("/")[0]) - 1))
    except (OSError, ValueError, IndexError):
        return 0.0


def default_threads(busy: Optional[float] = None, cores: Optional[int] = None) -> Optional[int]:
    """The threads a command gives torch when ``--threads`` is not given: :func:`usable_cores` less
    :func:`busy_cores` (rounded), at least 1. None when ``OMP_NUM_THREADS`` is set (torch follows it)."""
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    cores = usable_cores() if cores is None else cores
    busy = busy_cores() if busy is None else busy
    return max(1, min(cores, cores - int(round(busy))))


__all__ = ["busy_cores", "cgroup_cpu_quota", "default_threads", "usable_cores"]
