"""The wheel holds every source file under its mapped import path, and installs the console script; the wheel
and the sdist carry the licence."""

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# folder in the repository → import path inside the wheel (pyproject.toml's package-dir mapping)
MAPPING = {"mlip": "mlip", "models": "mlip/models", "calculators": "mlip/calculators", "kernels": "mlip/kernels"}
SOURCE_SUFFIXES = {".py", ".cu", ".cuh", ".yaml", ".safetensors"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    wheels = list(out.glob("mlip_torch-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    out = tmp_path_factory.mktemp("sdist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--skip-dependency-check", "--outdir", str(out),
         str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    archives = list(out.glob("mlip_torch-*.tar.gz")) + list(out.glob("mlip-torch-*.tar.gz"))
    assert len(archives) == 1, archives
    return archives[0]


def test_wheel_and_sdist_carry_the_licence(wheel, sdist):
    """The top-level LICENSE (MIT, "The mlip developers") is in the wheel's dist-info and at the sdist's root."""
    licence = (ROOT / "LICENSE").read_text()
    assert licence.startswith("MIT License") and "The mlip developers" in licence
    zf = zipfile.ZipFile(wheel)
    in_wheel = [n for n in zf.namelist() if ".dist-info/" in n and n.endswith("/LICENSE")]
    assert len(in_wheel) == 1, zf.namelist()
    assert zf.read(in_wheel[0]).decode() == licence
    with tarfile.open(sdist) as tf:
        in_sdist = [m for m in tf.getmembers() if m.name.count("/") == 1 and m.name.endswith("/LICENSE")]
        assert len(in_sdist) == 1, tf.getnames()
        assert tf.extractfile(in_sdist[0]).read().decode() == licence


def test_wheel_contains_every_source_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = set()
    for folder, target in MAPPING.items():
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in SOURCE_SUFFIXES and "__pycache__" not in path.parts:
                expected.add(f"{target}/{path.relative_to(ROOT / folder).as_posix()}")
    assert len(expected) > 20
    missing = sorted(expected - names)
    assert not missing, f"files missing from the wheel (list the subpackage in pyproject.toml): {missing}"


def test_wheel_metadata(wheel):
    zf = zipfile.ZipFile(wheel)
    meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    text = zf.read(meta).decode()
    assert "Name: mlip-torch" in text
    for dep in ("torch", "numpy", "ase", "vesin", "safetensors"):
        assert f"Requires-Dist: {dep}" in text
    entry = next(n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt"))
    assert "mlip = mlip.cli:main" in zf.read(entry).decode()
    # No test or example code leaks into the installed package namespace.
    assert not any(n.startswith(("tests/", "examples/", "benchmarks/")) for n in zf.namelist())


def test_subpackages_import_from_one_namespace(monkeypatch):
    import mlip.calculators
    import mlip.kernels
    import mlip.models

    assert Path(mlip.models.__file__).parent.name == "models"
    assert mlip.calculators.MLIPCalculator is mlip.MLIPCalculator
    monkeypatch.setenv("MLIP_DISABLE_KERNELS", "1")
    assert mlip.kernels.cuda_kernels_available() is False
    monkeypatch.delenv("MLIP_DISABLE_KERNELS")
    import torch

    if not torch.cuda.is_available():
        assert mlip.kernels.cuda_kernels_available() is False


def test_wheel_ships_the_trained_models_with_their_cards(wheel):
    from mlip import pretrained

    zf = zipfile.ZipFile(wheel)
    sizes = {info.filename: info.file_size for info in zf.infolist()}
    assert pretrained.TRAINED
    for name, filename in pretrained.TRAINED.items():
        for part in (filename, f"{name}.md", f"{name}.json"):
            assert f"mlip/models/pretrained/{part}" in sizes, part
        assert sizes[f"mlip/models/pretrained/{filename}"] < 5_000_000  # "a few MB at most"
