"""Checkpoints: safetensors weights plus a JSON header. Loading never executes code from the file.

The header (stored in the safetensors metadata under the key ``"mlip"``) holds everything needed
to rebuild the potential: architecture, hyperparameters, species, cutoff, reference energies,
scale, the package version that wrote it and free-form metadata (training provenance).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Dict, Optional, Tuple, Union

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


def write_with_header(source: Union[str, Path], target: Union[str, Path], header: dict) -> Path:
    """Write checkpoint ``source`` to ``target`` (atomically; ``target`` may be ``source``) with the mlip
    header ``header`` and the stored tensors' bytes exactly as they are: a change of metadata that
    cannot change a weight. Returns the target.

    ``header`` is checked as :func:`read_header` checks a file's (ValueError if it is not JSON).
    """
    source = Path(source)
    read_header(source)
    raw = source.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    index = json.loads(raw[8:8 + n])  # tensor name → dtype, shape, offsets into the data that follows
    try:
        header_json = json.dumps(header, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"the header is not JSON-serialisable: {err}") from None
    index["__metadata__"] = {**index.get("__metadata__", {}), HEADER_KEY: header_json}
    blob = json.dumps(index, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    data = raw[8 + n:]

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(struct.pack("<Q", len(blob)) + blob + data)

    atomic_write(target, write)
    read_header(target)
    return Path(target)


def read_header(path: Union[str, Path]) -> dict:
    """Read and validate the JSON header of a checkpoint without loading weights."""
    from safetensors import safe_open

    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"{path} is a directory, not a checkpoint")
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


def _stored_tensor_shapes(path: Path) -> Dict[str, Tuple[int, ...]]:
    """name → shape of every tensor in the file, read from its index (no tensor is loaded)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as fh:
            return {key: tuple(fh.get_slice(key).get_shape()) for key in fh.keys()}
    except Exception as err:  # safetensors raises its own error types for corrupt files
        raise CheckpointError(f"{path}: not a readable safetensors checkpoint ({err})") from None


def check_header(path: Union[str, Path], header: Optional[dict] = None) -> Tuple[dict, object]:
    """Check what ``header`` (default: the file's, :func:`read_header`) asks to build against the
    tensors stored in checkpoint ``path``, before anything is built or loaded; returns the
    (hyperparameters, terms) that rebuild the model, upgraded from an earlier layout.

    :class:`CheckpointError` naming the file for an architecture the registry does not know, an
    unknown or mistyped hyperparameter or term, species that are not elements, a cutoff that is not a
    positive number, or hyperparameters that describe other tensors than those stored (the network and
    its terms are built on the meta device, which allocates nothing, and stopped once they would hold
    far more numbers than the file: a small file cannot make the loader allocate gigabytes).
    """
    from mlip.elements import to_atomic_numbers
    from mlip.models import get_architecture
    from mlip.models.legacy import upgrade_checkpoint
    from mlip.models.shapes import ModelTooLargeError, stored_shapes

    path = Path(path)
    header = read_header(path) if header is None else header
    stored = _stored_tensor_shapes(path)
    try:
        architecture = get_architecture(header["architecture"])
        # A hyperparameter added after the checkpoint was written takes the value that reproduces it
        # (the architecture's LEGACY_HYPERPARAMETERS), not the default a new model gets.
        legacy = getattr(architecture, "LEGACY_HYPERPARAMETERS", {})
        # a file of an earlier layout (the embedded-atom term inside the network) in the present one
        hyperparameters, terms, stored = upgrade_checkpoint(header["hyperparameters"], header.get("terms"),
                                                            stored)
        hyperparameters = {**legacy, **hyperparameters}
        species = header["species"]
        if not isinstance(species, list) or not species:
            raise ValueError(f"species must be a list of elements, got {species!r}")
        atomic_numbers = to_atomic_numbers(species)
        cutoff = header["cutoff"]
        if isinstance(cutoff, bool) or not isinstance(cutoff, (int, float)) or not 0 < cutoff < math.inf:
            raise ValueError(f"cutoff must be a positive number of Å, got {cutoff!r}")
        # Derived constants (not stored) come on top of the weights; 4× the stored numbers plus ten
        # million leaves them room and stops a header asking for a thousand times the stored weights.
        numbers = sum(math.prod(shape) for shape in stored.values())
        expected = stored_shapes(header["architecture"], atomic_numbers, cutoff, hyperparameters, terms,
                                 max_elements=4 * numbers + 10_000_000)
    except ModelTooLargeError as err:
        raise CheckpointError(f"{path}: the header's hyperparameters describe a model of {err}, the file "
                              f"stores {numbers:,}: the header does not match the weights") from None
    except (ValueError, TypeError, KeyError) as err:
        raise CheckpointError(f"{path}: the header does not describe a model this package can build: "
                              f"{err}") from None
    ours = {key: shape for key, shape in stored.items() if key.split(".", 1)[0] in ("model", "terms")}
    _raise_on_mismatch(path, expected, ours)
    return hyperparameters, terms


def _raise_on_mismatch(path: Path, expected: Dict[str, tuple], stored: Dict[str, tuple]) -> None:
    """CheckpointError naming the missing, unexpected and misshapen tensors of ``stored`` (name → shape)
    against ``expected``; nothing when they agree."""
    missing = sorted(set(expected) - set(stored))
    unexpected = sorted(set(stored) - set(expected))
    wrong = sorted(k for k in set(expected) & set(stored) if tuple(expected[k]) != tuple(stored[k]))
    if not (missing or unexpected or wrong):
        return
    parts = []
    if missing:
        parts.append(f"missing tensors {missing[:5]}{'...' if len(missing) > 5 else ''}")
    if unexpected:
        parts.append(f"unexpected tensors {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}")
    if wrong:
        parts.append("shape mismatch " + ", ".join(
            f"{k}: file {tuple(stored[k])} vs model {tuple(expected[k])}" for k in wrong[:5]))
    raise CheckpointError(f"{path}: weights do not match the architecture in the header ({'; '.join(parts)})")


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
    from mlip.models import create_model
    from mlip.models.legacy import upgrade_checkpoint

    path = Path(path)
    header = read_header(path)
    hyperparameters, terms = check_header(path, header)  # before anything is allocated
    _, _, tensors = upgrade_checkpoint(header["hyperparameters"], header.get("terms"), _load_file(path))
    try:
        potential = create_model(
            header["architecture"],
            species=header["species"],
            cutoff=header["cutoff"],
            reference_energies=header["reference_energies"],
            scale=header["scale"],
            repulsion=header.get("repulsion"),  # written before the term existed: none
            terms=terms,
            **hyperparameters,
        )
    except (ValueError, TypeError) as err:
        raise CheckpointError(f"{path}: cannot rebuild the model described by the header: {err}") from None
    _raise_on_mismatch(path, {k: tuple(v.shape) for k, v in potential.state_dict().items()},
                       {k: tuple(v.shape) for k, v in tensors.items()})
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
