"""Save → load → evaluate is bit-identical in float64 and float32; derived constants (S² grid
matrices, radial frequencies and centres, layer-norm weights) survive dtype casts exactly; files
written atomically get the user's normal permissions (0666 minus the umask)."""

import copy
import os
import stat

import numpy as np
import pytest
import torch

import mlip
from mlip import pretrained
from mlip.checkpoint import save_potential
from mlip.io import write_json
from mlip.testing import build_potential, check_save_load
from mlip.testing.structures import triclinic_crystal


def evaluate(potential, dtype):
    atoms = triclinic_crystal()
    atoms.calc = mlip.MLIPCalculator(potential, device="cpu", dtype=dtype)
    return atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()


def assert_bit_identical(a, b):
    (e0, f0, s0), (e1, f1, s1) = a, b
    assert e0 == e1
    assert np.array_equal(f0, f1) and np.array_equal(s0, s1)


def derived_constants(potential):
    """The floating-point buffers a checkpoint does not store (rebuilt from the hyperparameters)."""
    stored = set(potential.state_dict())
    return {k: b for k, b in potential.named_buffers() if k not in stored and b.is_floating_point()}


@pytest.mark.parametrize("stored", ["created", "float32", "float64"])
def test_save_load_evaluate_is_bit_identical(arch, stored, tmp_path):
    # "created": as create_model makes it (float32 weights, float64 derived constants); else cast whole
    potential = build_potential(arch, dtype=None if stored == "created" else getattr(torch, stored))
    # bit-identical energy, forces and stress in float64 and float32 (the suite's save/load check)
    loaded = check_save_load(potential, tmp_path)
    # the derived constants are those create_model builds (float64), whatever precision the file has
    created = derived_constants(build_potential(arch, dtype=None))
    loaded_constants = derived_constants(loaded)
    assert created and created.keys() == loaded_constants.keys()
    for name, value in loaded_constants.items():
        assert value.dtype == torch.float64 and torch.equal(value, created[name]), name


def test_cast_to_float32_and_back_restores_derived_constants_exactly(arch):
    potential = build_potential(arch, dtype=None)
    constants = derived_constants(potential)
    cast = copy.deepcopy(potential)
    # only the model, its learned terms and the repulsion term: the reference energies and scale are
    # stored state, rounded like any weight
    modules = [m for m in (cast.model, cast.terms, cast.repulsion) if m is not None]
    for module in modules:
        module.to(torch.float32)
    for name, value in derived_constants(cast).items():
        assert value.dtype == torch.float32 and torch.equal(value, constants[name].float()), name
    for module in modules:
        module.to(torch.float64)
    for name, value in derived_constants(cast).items():
        assert value.dtype == torch.float64 and torch.equal(value, constants[name]), name
    for module in modules:
        module.to(torch.float32)  # the calculator makes the float64 copy
    assert_bit_identical(evaluate(potential, "float64"), evaluate(cast, "float64"))


@pytest.mark.parametrize("name", sorted(pretrained.TRAINED))
def test_shipped_models_keep_float64_derived_constants(name):
    constants = derived_constants(pretrained.load(name))
    assert constants and all(value.dtype == torch.float64 for value in constants.values())


@pytest.fixture(params=[0o022, 0o077], ids=["umask022", "umask077"])
def umask(request):
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_checkpoint_gets_the_umask_permissions(umask, tmp_path):
    potential = build_potential("embedded-atom")
    path = save_potential(potential, tmp_path / "model.safetensors")
    assert mode(path) == 0o666 & ~umask  # 0644 under umask 022: safetensors alone writes 0600
    save_potential(potential, path)  # overwriting too
    assert mode(path) == 0o666 & ~umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]


@pytest.mark.parametrize("compress", [False, True])
def test_json_gets_the_umask_permissions(umask, tmp_path, compress):
    path = tmp_path / ("out.json.gz" if compress else "out.json")
    write_json(path, {"a": 1}, compress=compress)
    assert mode(path) == 0o666 & ~umask
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
