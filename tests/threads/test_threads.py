"""mlip.threads: the cores a process may use, those others keep busy, and the threads a command takes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mlip import threads

ROOT = Path(__file__).resolve().parents[2]


def test_a_cgroup_quota_bounds_the_cores(tmp_path, monkeypatch):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert threads.cgroup_cpu_quota(tmp_path) == pytest.approx(1.5)
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert threads.cgroup_cpu_quota(tmp_path) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert threads.cgroup_cpu_quota(v1) == pytest.approx(0.5)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert threads.cgroup_cpu_quota(v1) is None
    assert threads.cgroup_cpu_quota(tmp_path / "none") is None
    # a quota of 1.5 cores on a process allowed every core: 2 threads
    monkeypatch.setattr(threads, "cgroup_cpu_quota", lambda root=None: 1.5)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert threads.usable_cores() == 2
    monkeypatch.setattr(threads, "cgroup_cpu_quota", lambda root=None: None)
    assert threads.usable_cores() == 64


def test_busy_cores_take_the_smaller_of_the_average_and_the_tasks_running_now(tmp_path):
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("3.50 2.00 1.00 2/345 999\n")  # a run just ended: 1 other task runs now
    assert threads.busy_cores(loadavg) == 1.0
    loadavg.write_text("0.20 0.10 0.05 5/345 999\n")  # a passing burst: the average says 0.2
    assert threads.busy_cores(loadavg) == pytest.approx(0.2)
    loadavg.write_text("garbage\n")
    assert threads.busy_cores(loadavg) == 0.0


def test_default_threads(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert threads.default_threads(busy=0.3, cores=2) == 2
    assert threads.default_threads(busy=1.2, cores=2) == 1
    assert threads.default_threads(busy=7.0, cores=2) == 1  # at least one
    assert threads.default_threads(busy=2.0, cores=16) == 14
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads.default_threads(busy=0.0, cores=2) is None  # the user chose: torch follows it


def test_a_command_without_threads_takes_the_default_and_restores_torch_after(tmp_path, monkeypatch):
    import torch

    from mlip.cli import main

    monkeypatch.setattr(threads, "default_threads", lambda: 1)
    before = torch.get_num_threads()
    seen = []
    real = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (seen.append(n), real(n)))
    relax = ["relax", str(ROOT / "examples" / "structures" / "cu_fcc.cif"), "--model",
             "ase.calculators.emt:EMT", "--steps", "1", "--no-progress"]
    code = main([*relax, "-o", str(tmp_path / "r.extxyz")])
    assert code in (0, 3) and seen[0] == 1 and seen[-1] == before and torch.get_num_threads() == before
    seen.clear()
    code = main([*relax, "-o", str(tmp_path / "s.extxyz"), "--threads", "2"])
    assert code in (0, 3) and seen[0] == 2  # --threads wins
