"""The test environment is pinned: constraints/test.txt gives one version of every library the test extra
installs (the README's test command and both CI jobs install with it), so a new release cannot change a
number the tests compare; and the suite's parallel runs keep a module's expensive fixture on one worker."""

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
CONSTRAINTS = ROOT / "constraints" / "test.txt"
pytestmark = pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(), reason="installed tests")
#: the libraries whose numbers the tests compare with (phonons, κ, symmetry, hulls, metrics, references)
NUMERICAL = ["phonopy", "phono3py", "spglib", "numpy", "scipy", "ase", "pymatgen", "matbench-discovery",
             "e3nn", "pandas", "vesin", "safetensors"]


def pins() -> dict:
    """name → pinned version of every line of constraints/test.txt (each must be ``name==version``)."""
    out = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.+!-]+)", line)
        assert match, f"not name==version: {line!r}"
        name = canonicalize_name(match.group(1))
        assert name not in out, f"{name} pinned twice"
        out[name] = Version(match.group(2))
    return out


def test_every_library_of_the_test_extra_is_pinned_within_its_bounds():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = pins()
    extra = project["optional-dependencies"]["test"]
    requirements = [Requirement(r) for r in project["dependencies"] + extra]
    for req in requirements:
        name = canonicalize_name(req.name)
        if name == "torch":  # the test command pins it: pip install torch==...
            assert name not in pinned
            continue
        exact = [s for s in req.specifier if s.operator == "=="]
        if exact:  # pinned in pyproject.toml itself (e3nn, torch-sim-atomistic)
            assert name not in pinned or pinned[name] == Version(exact[0].version), name
            continue
        assert name in pinned, f"{req.name} (test extra or dependency) is not in {CONSTRAINTS.name}"
        assert req.specifier.contains(pinned[name], prereleases=True), f"{name}=={pinned[name]} outside {req}"
    for name in NUMERICAL:
        assert canonicalize_name(name) in pinned, name


def test_the_ci_jobs_install_with_the_constraints():
    readme = (ROOT / "README.md").read_text()
    command = readme.split("<!-- test-command -->", 1)[1].split("```bash\n", 1)[1].split("\n", 1)[0]
    assert "-c constraints/test.txt" in command and "pip install torch==" in command
    torch_pin = re.search(r"torch==(\S+)", command).group(1)
    ci = ROOT / ".ci" / "run"
    if ci.is_file():  # the torch-sim job (Python 3.12) has its own install line
        lines = ci.read_text().splitlines()
        install = [line for line in lines if "pip install" in line and ".[torchsim" in line]
        assert len(install) == 1, install
        assert "-c constraints/test.txt" in install[0] and f"torch=={torch_pin}" in install[0], install[0]


def test_the_docs_build_is_pinned_and_strict():
    """.ci/run installs the docs extra with the constraints, which pin each of its libraries within its bounds,
    and builds the site with warnings as errors."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = pins()
    for req in map(Requirement, project["optional-dependencies"]["docs"]):
        name = canonicalize_name(req.name)
        assert name in pinned and req.specifier.contains(pinned[name]), f"docs extra: {req} not pinned within"
    for name in ("mkdocstrings-python", "griffelib"):  # mkdocstrings[python] and the docstring parser
        assert name in pinned, name
    ci = ROOT / ".ci" / "run"
    if ci.is_file():
        lines = ci.read_text().splitlines()
        assert any("pip install" in line and '".[docs]"' in line and "-c constraints/test.txt" in line
                   for line in lines)
        assert any(line.startswith("mkdocs build --strict") for line in lines)


@pytest.fixture(scope="module")
def shared():
    return object()


def test_a_test_with_a_module_fixture_is_in_its_modules_xdist_group(request, shared):
    """tests/conftest.py groups the tests that use a module-scoped fixture by module, so that under
    ``--dist loadgroup`` one worker computes the fixture once; other tests stay free."""
    marker = request.node.get_closest_marker("xdist_group")
    assert marker is not None and marker.args == ("tests/packaging/test_test_environment.py",)


def test_a_test_without_one_is_not_grouped(request):
    assert request.node.get_closest_marker("xdist_group") is None
