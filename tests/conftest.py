"""Shared fixtures: ``arch`` (each architecture the physics suite runs on) and ``potential64`` (its
float64 potential). The architectures, the structures and the checks live in :mod:`mlip.testing`; to put
a new architecture through the whole suite, add an entry to ``mlip.testing.ARCHITECTURES``.

Under pytest-xdist with ``--dist loadgroup`` (the README's test command) the tests of a module that uses a
module-scoped fixture form one group, run by one worker: the fixture (a κ calculation, a miniature
benchmark, a wheel) is computed once, not once per worker. Other tests are dealt out one by one.
"""

from __future__ import annotations

import os

# The test structures are small (≤ 100 atoms): one thread is as fast as two and, unlike two OpenMP/
# OpenBLAS threads spin-waiting for each other, stays fast when the 2-core machine is shared.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from mlip.testing import ARCHITECTURES, build_potential  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Every test ends with the one torch thread it started with. A test that leaves more (a benchmark's
    main() run in-process that sets its own) fails, and the thread count is put back: the tests after it in
    the same process would otherwise run with threads that spin-wait for each other, which took six times
    the CPU on a loaded 2-core machine."""
    yield
    threads = torch.get_num_threads()
    if threads != 1:
        torch.set_num_threads(1)
        pytest.fail(f"the test left torch with {threads} threads (restore torch.set_num_threads)")


def uses_module_fixture(item) -> bool:
    """Whether the test ``item`` uses a module-scoped fixture."""
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return any(defs and defs[-1].scope == "module" for defs in definitions.values())


def pytest_collection_modifyitems(config, items):
    for item in items:
        if uses_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


@pytest.fixture(params=sorted(ARCHITECTURES))
def arch(request):
    return request.param


@pytest.fixture
def potential64(arch):
    return build_potential(arch)
