"""Checkpoints: safetensors weights plus a JSON header. Loading never executes code from the file.

The header (stored in the safetensors metadata under the key ``"mlip"``) holds everything needed
to rebuild the potential: architecture, hyperparameters, species, cutoff, reference energies,
scale, the package version that wrote it and free-form metadata (training provenance).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Union

import torch

from mlip.io import atomic_write
from mlip.potential import Potential
from mlip.version import __version__

FORMAT = "mlip-checkpoint"
#: 2 adds ``isolated_reference``, 3 ``repulsion``, 4 ``terms``; a file is written with the lowest version that
#: describes it (older packages read the files they can evaluate correctly and refuse the others)
FORMAT_VERSION = 4
HEADER_KEY = "mlip"


class CheckpointError(ValueError):
    """A checkpoint file is corrupted, incompatible or not an mlip checkpoint."""


def checkpoint_header(potential: Potential) -> dict:
    """The JSON header describing ``potential``."""
    header = {
        "format": FORMAT,
        "format_version": (4 if potential.term_specs else 3 if potential.repulsion is not None
                           else 2 if potential.isolated_reference else 1),
        "package_version": __version__,
        "architecture": potential.architecture,
        "hyperparameters": potential.hyperparameters,
        "species": potential.species,
        "cutoff": potential.cutoff,
        "reference_energies": [float(x) for x in potential.reference_energies.tolist()],
        "scale": float(potential.scale),
        "units": {"energy": "eV", "length": "Å", "stress": "eV/Å^3"},
        "num_parameters": potential.num_parameters(),
        "metadata": potential.metadata,
    }
    if potential.isolated_reference:  # a package that ignored it would give wrong energies: version 2
        header["isolated_reference"] = True
    if potential.repulsion is not None:  # the same for the repulsion term: version 3
        header["repulsion"] = potential.repulsion.config()
    if potential.term_specs:  # the same for the learned terms: version 4
        header["terms"] = potential.term_specs
    return header


def save_potential(potential: Potential, path: Union[str, Path]) -> Path:
    """Write ``potential`` to ``path`` (safetensors + JSON header), atomically. Returns the path."""
    from safetensors.torch import save_file

    header = checkpoint_header(potential)
    try:
        header_json = json.dumps(header, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"potential hyperparameters/metadata are not JSON-serialisable: {err}") from None
    tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in potential.state_dict().items()}
    atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata={HEADER_KEY: header_json}))
    return Path(path)


def save_with_hyperparameters(source: Union[str, Path], target: Union[str, Path], **values) -> Potential:
    """Copy the checkpoint ``source`` to ``target`` with hyperparameters that change how the same weights
    are evaluated, not the weights (a Platonic model's ``orientation`` or ``average_over``); returns the
    potential loaded back from ``target``. ValueError for a hyperparameter the model does not have."""
    potential = load_potential(source)
    for key, value in values.items():
        if not hasattr(potential.model, key):
            raise ValueError(f"{source}: the {potential.architecture} model has no hyperparameter {key!r}")
        potential.hyperparameters[key] = value
        setattr(potential.model, key, value)
    save_potential(potential, target)
    potential = load_potential(target)
    assert all(getattr(potential.model, key) == value for key, value in values.items())
    return potential


def read_header(path: Union[str, Path]) -> dict:
    """Read and validate the JSON header of a checkpoint without loading weights."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist")
    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = fh.metadata() or {}
    except Exception as err:  # safetensors raises its own error types for corrupt files
        raise CheckpointError(f"{path}: not a readable safetensors checkpoint ({err})") from None
    if HEADER_KEY not in meta:
        raise CheckpointError(f"{path}: safetensors file has no '{HEADER_KEY}' header; not an mlip checkpoint")
    try:
        header = json.loads(meta[HEADER_KEY])
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{path}: checkpoint header is not valid JSON ({err})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CheckpointError(f"{path}: header is not an {FORMAT} header")
    version = header.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format version {version!r} is newer than this package supports "
            f"({FORMAT_VERSION}); upgrade mlip-torch (file written by {header.get('package_version')})"
        )
    for key in ("architecture", "hyperparameters", "species", "cutoff", "reference_energies", "scale"):
        if key not in header:
            raise CheckpointError(f"{path}: checkpoint header lacks '{key}'")
    return header


def _load_file(path: Path) -> dict:
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except Exception as err:
        raise CheckpointError(f"{path}: checkpoint weights are corrupted or truncated ({err})") from None


def load_potential(path: Union[str, Path]) -> Potential:
    """Load a potential from a checkpoint file (a shipped model by its name:
    :func:`mlip.load_potential`, i.e. :func:`mlip.pretrained.load_potential`).

    Raises ``FileNotFoundError`` for a missing file and :class:`CheckpointError` (a ``ValueError``)
    for a corrupted file, an unknown architecture or tensors that do not match the architecture
    described by the header.
    """
    from mlip.models import create_model, get_architecture
    from mlip.models.legacy import upgrade_checkpoint

    path = Path(path)
    header = read_header(path)
    tensors = _load_file(path)
    try:
        # A hyperparameter added after the checkpoint was written takes the value that reproduces it
        # (the architecture's LEGACY_HYPERPARAMETERS), not the default a new model gets.
        legacy = getattr(get_architecture(header["architecture"]), "LEGACY_HYPERPARAMETERS", {})
        # a file of an earlier layout (the embedded-atom term inside the network) in the present one
        hyperparameters, terms, tensors = upgrade_checkpoint(header["hyperparameters"], header.get("terms"), tensors)
        potential = create_model(
            header["architecture"],
            species=header["species"],
            cutoff=header["cutoff"],
            reference_energies=header["reference_energies"],
            scale=header["scale"],
            repulsion=header.get("repulsion"),  # written before the term existed: none
            terms=terms,
            **{**legacy, **hyperparameters},
        )
    except (ValueError, TypeError) as err:
        raise CheckpointError(f"{path}: cannot rebuild the model described by the header: {err}") from None
    expected = potential.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    wrong = sorted(k for k in set(expected) & set(tensors) if tuple(expected[k].shape) != tuple(tensors[k].shape))
    if missing or unexpected or wrong:
        parts = []
        if missing:
            parts.append(f"missing tensors {missing[:5]}{'...' if len(missing) > 5 else ''}")
        if unexpected:
            parts.append(f"unexpected tensors {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}")
        if wrong:
            parts.append(
                "shape mismatch "
                + ", ".join(f"{k}: file {tuple(tensors[k].shape)} vs model {tuple(expected[k].shape)}" for k in wrong[:5])
            )
        raise CheckpointError(f"{path}: weights do not match the architecture in the header ({'; '.join(parts)})")
    for k, v in tensors.items():
        if v.is_floating_point() and not bool(torch.isfinite(v).all()):
            raise CheckpointError(f"{path}: tensor {k!r} contains NaN or inf")
    # Take the stored tensors as they are (assign=True keeps their dtype: bit-identical results) and
    # the derived, non-stored constants as create_model built them (float64: they follow the model
    # when it is cast, e.g. by a calculator, and a float64 copy of it gets them unrounded).
    potential.load_state_dict(tensors, strict=True, assign=True)
    # The header repeats species and reference energies in readable form: they must agree.
    if potential.species != list(header["species"]):
        raise CheckpointError(f"{path}: header species {header['species']} disagree with the stored tensors")
    ref = potential.reference_energies.tolist()
    if any(not math.isclose(a, b, rel_tol=0, abs_tol=1e-12) for a, b in zip(ref, header["reference_energies"])):
        raise CheckpointError(f"{path}: header reference energies disagree with the stored tensors")
    isolated = header.get("isolated_reference", False)
    if not isinstance(isolated, bool):
        raise CheckpointError(f"{path}: header isolated_reference must be true or false, got {isolated!r}")
    potential.isolated_reference = isolated
    potential.metadata = dict(header.get("metadata") or {})
    potential.eval()
    return potential
