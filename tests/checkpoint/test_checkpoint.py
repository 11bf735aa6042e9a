"""Checkpoints: safetensors + JSON header; exact round trips and clear errors. Nothing is unpickled."""

import json
import struct

import numpy as np
import pytest
import torch
from ase.build import bulk

import mlip
from mlip.checkpoint import CheckpointError, read_header, save_potential, save_with_hyperparameters
from mlip.models import create_model

from mlip.testing import build_potential


def energy_forces(potential, dtype):
    atoms = bulk("Cu", "fcc", a=3.6, cubic=True) * (2, 1, 1)
    atoms.numbers[1] = 79
    atoms.rattle(0.05, seed=0)
    atoms.calc = mlip.MLIPCalculator(potential, device="cpu", dtype=dtype)
    return atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_round_trip_is_bit_identical(arch, tmp_path, dtype):
    potential = build_potential(arch, dtype=getattr(torch, dtype))
    potential.metadata = {"trained_on": "nothing", "epochs": 0}
    path = save_potential(potential, tmp_path / "model.safetensors")
    loaded = mlip.load_potential(path)
    assert loaded.architecture == potential.architecture
    assert loaded.species == potential.species
    assert loaded.cutoff == potential.cutoff
    assert loaded.hyperparameters == potential.hyperparameters
    assert loaded.metadata == potential.metadata
    for (k, a), (k2, b) in zip(potential.state_dict().items(), loaded.state_dict().items()):
        assert k == k2 and a.dtype == b.dtype and torch.equal(a, b), k
    e0, f0, s0 = energy_forces(potential, dtype)
    e1, f1, s1 = energy_forces(loaded, dtype)
    assert e0 == e1 and np.array_equal(f0, f1) and np.array_equal(s0, s1)


def test_header_contents(tmp_path):
    potential = create_model("platonic", species=["Cu", "Au"], cutoff=4.5, reference_energies=[-1.0, -2.0], scale=0.5)
    path = save_potential(potential, tmp_path / "m.safetensors")
    h = read_header(path)
    assert h["architecture"] == "platonic"
    assert h["species"] == ["Cu", "Au"]
    assert h["cutoff"] == 4.5
    assert h["reference_energies"] == [-1.0, -2.0]
    assert h["scale"] == 0.5
    assert h["package_version"] == mlip.__version__
    assert h["num_parameters"] == potential.num_parameters()
    assert h["hyperparameters"]["group"] == "tetrahedral"


def test_save_with_hyperparameters_evaluates_the_same_weights_another_way(tmp_path):
    """A Platonic model saved with ``average_over`` has the trained weights and the energy of a model made
    with that option from the start; a hyperparameter the model lacks is refused, naming it."""
    trained = build_potential("platonic-softmax")
    source = save_potential(trained, tmp_path / "trained.safetensors")
    shipped = save_with_hyperparameters(source, tmp_path / "shipped.safetensors", average_over="icosahedral")
    assert read_header(tmp_path / "shipped.safetensors")["hyperparameters"]["average_over"] == "icosahedral"
    for (k, a), (k2, b) in zip(trained.state_dict().items(), shipped.state_dict().items()):
        assert k == k2 and torch.equal(a.double(), b.double()), k
    trained.model.average_over = "icosahedral"  # the same weights, averaged
    e_shipped, f_shipped, _ = energy_forces(shipped, "float64")
    e_direct, f_direct, _ = energy_forces(trained, "float64")
    assert e_shipped == pytest.approx(e_direct, abs=1e-9) and np.allclose(f_shipped, f_direct, atol=1e-9)
    trained.model.average_over = None
    assert abs(energy_forces(trained, "float64")[0] - e_shipped) > 1e-6  # averaging changes the energy
    with pytest.raises(ValueError, match="no hyperparameter 'group_size'"):
        save_with_hyperparameters(source, tmp_path / "bad.safetensors", group_size=3)


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path):
    potential = create_model("platonic", species=["Cu"], cutoff=4.0, channels=4, num_layers=1)
    save_potential(potential, tmp_path / "m.safetensors")
    save_potential(potential, tmp_path / "m.safetensors")  # overwrite
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]


@pytest.fixture
def saved(tmp_path):
    potential = create_model("platonic", species=["Cu", "Au"], cutoff=4.0, channels=4, num_layers=1, seed=0)
    return save_potential(potential, tmp_path / "good.safetensors")


def rewrite_header(path, out, edit):
    """Rewrite the safetensors JSON header (tensors untouched) through ``edit(header_dict)``."""
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    edit(header)
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    out.write_bytes(struct.pack("<Q", len(blob)) + blob + raw[8 + n :])
    return out


def test_truncated_file(saved, tmp_path):
    bad = tmp_path / "truncated.safetensors"
    bad.write_bytes(saved.read_bytes()[:-100])
    with pytest.raises(CheckpointError, match="truncated.safetensors"):
        mlip.load_potential(bad)


def test_garbage_file(tmp_path):
    bad = tmp_path / "garbage.safetensors"
    bad.write_bytes(b"\x00\x01 this is not a checkpoint" * 10)
    with pytest.raises(CheckpointError, match="not a readable safetensors checkpoint"):
        mlip.load_potential(bad)


def test_pickle_is_never_loaded(tmp_path):
    """A torch.save pickle is rejected without being unpickled."""
    bad = tmp_path / "model.pt"
    torch.save({"weights": torch.zeros(3)}, bad)
    with pytest.raises(CheckpointError):
        mlip.load_potential(bad)


def test_safetensors_without_mlip_header(tmp_path):
    from safetensors.torch import save_file

    bad = tmp_path / "plain.safetensors"
    save_file({"x": torch.zeros(2)}, str(bad))
    with pytest.raises(CheckpointError, match="not an mlip checkpoint"):
        mlip.load_potential(bad)


def edit_mlip_header(fn):
    def edit(header):
        h = json.loads(header["__metadata__"]["mlip"])
        fn(h)
        header["__metadata__"]["mlip"] = json.dumps(h)

    return edit


def test_unknown_architecture(saved, tmp_path):
    bad = rewrite_header(saved, tmp_path / "arch.safetensors",
                         edit_mlip_header(lambda h: h.update(architecture="transformer9000")))
    with pytest.raises(CheckpointError, match="unknown architecture 'transformer9000'"):
        mlip.load_potential(bad)


def test_mismatched_tensors(saved, tmp_path):
    bad = rewrite_header(saved, tmp_path / "shape.safetensors",
                         edit_mlip_header(lambda h: h["hyperparameters"].update(channels=8)))
    with pytest.raises(CheckpointError, match="shape mismatch"):
        mlip.load_potential(bad)
    bad = rewrite_header(saved, tmp_path / "layers.safetensors",
                         edit_mlip_header(lambda h: h["hyperparameters"].update(num_layers=2)))
    with pytest.raises(CheckpointError, match="missing tensors"):
        mlip.load_potential(bad)


def test_a_header_cannot_make_the_loader_allocate(saved, tmp_path):
    """A small file whose header asks for a million channels (terabytes) or a million layers is refused,
    naming the file, from the stored tensors' shapes: the model is sized on the meta device first."""
    for name, change in (("wide", dict(channels=10**6)), ("deep", dict(num_layers=10**6))):
        bad = rewrite_header(saved, tmp_path / f"{name}.safetensors",
                             edit_mlip_header(lambda h: h["hyperparameters"].update(change)))
        with pytest.raises(CheckpointError, match=rf"^{bad}: the header's hyperparameters describe a model of "
                                                  rf"more than [\d,]+ numbers .*does not match the weights"):
            mlip.load_potential(bad)


def test_a_directory_is_not_a_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="is a directory, not a checkpoint"):
        mlip.load_potential(tmp_path)


def test_header_disagrees_with_tensors(saved, tmp_path):
    bad = rewrite_header(saved, tmp_path / "species.safetensors",
                         edit_mlip_header(lambda h: h.update(species=["Au", "Cu"])))
    with pytest.raises(CheckpointError, match="species"):
        mlip.load_potential(bad)


def test_checkpoint_older_than_a_hyperparameter_loads_as_it_was_written(saved, tmp_path):
    """A Platonic checkpoint written before ``orientation`` existed has no such key: it loads with the
    value that reproduces it ("aligned", the group as written), not the default of a new model
    ("generic"); an unknown value is refused with a message naming it."""
    assert mlip.load_potential(saved).model.orientation == "generic"
    old = rewrite_header(saved, tmp_path / "old.safetensors",
                         edit_mlip_header(lambda h: h["hyperparameters"].pop("orientation")))
    assert mlip.load_potential(old).model.orientation == "aligned"
    bad = rewrite_header(saved, tmp_path / "sideways.safetensors",
                         edit_mlip_header(lambda h: h["hyperparameters"].update(orientation="sideways")))
    with pytest.raises(CheckpointError, match="orientation 'sideways'"):
        mlip.load_potential(bad)


def test_newer_format_version(saved, tmp_path):
    bad = rewrite_header(saved, tmp_path / "future.safetensors",
                         edit_mlip_header(lambda h: h.update(format_version=99)))
    with pytest.raises(CheckpointError, match="newer than this package supports"):
        mlip.load_potential(bad)


def test_nan_weights(tmp_path):
    potential = create_model("platonic", species=["Cu"], cutoff=4.0, channels=4, num_layers=1)
    with torch.no_grad():
        next(potential.parameters()).fill_(float("nan"))
    path = save_potential(potential, tmp_path / "nan.safetensors")
    with pytest.raises(CheckpointError, match="NaN or inf"):
        mlip.load_potential(path)


def test_missing_path_and_unknown_name():
    with pytest.raises(FileNotFoundError, match="neither a checkpoint file nor a shipped model"):
        mlip.load_potential("no-such-model")


def test_unknown_hyperparameter_is_rejected():
    with pytest.raises(TypeError, match="unknown hyperparameter"):
        create_model("platonic", species=["Cu"], cutoff=4.0, chanels=8)
    with pytest.raises(ValueError, match="unknown architecture"):
        create_model("nope", species=["Cu"], cutoff=4.0)
    with pytest.raises(ValueError, match="unknown chemical element 'Xx'"):
        create_model("platonic", species=["Cu", "Xx"], cutoff=4.0)
