"""Models that ship with the package, loadable offline by name.

Trained weights live in ``mlip/models/pretrained/<name>.safetensors``, each with its model card
``<name>.md`` and the measured numbers behind it ``<name>.json``:

* ``equiformer_v3-emt``: EquiformerV3 trained on the EMT reference data (the default: exactly
  rotation invariant and the more accurate of the two transformers);
* ``platonic-emt``: the Platonic Transformer trained on the same data (faster per MD step,
  invariant only to its tetrahedral group: its energy changes under other rotations);
* ``embedded-atom-emt``: no transformer, only the embedded-atom term (``embedded_atom``
  architecture: E_i = MLP(Z_i, element-resolved and logarithmic neighbour densities), the form of
  EMT itself), trained on the same data: the most accurate on it and far the cheapest per step.

All three reproduce ASE's EMT for Al, Cu, Ag, Au, Ni, Pd, Pt (bulk, surfaces, clusters), not DFT.

* ``equiformer_v3-chgnet``: EquiformerV3 distilled from CHGNet 0.3.0 for its 89 elements (H to Pu): it
  imitates a foundation potential, roughly (its card gives how far), and is not the default.
* ``equiformer_v3-sige`` and ``platonic-sige``: the two transformers trained on the package's own GPAW PBE
  data for silicon, germanium and their alloys (``examples/datasets/sige-pbe/``); the first models here of
  a first-principles reference. ``platonic-sige`` ships averaged over the cosets of its tetrahedral group
  in the icosahedral group (``average_over``).
The registry also holds an *untrained* entry, ``platonic-untrained`` (fixed-seed random weights),
labelled untrained everywhere it appears (name, a warning on load,
``potential.metadata["trained"] = False``); its energies are not physical.

:func:`load` loads a shipped model by name; :func:`load_potential` (``mlip.load_potential``) takes a
name or a checkpoint path, the files being read by :mod:`mlip.checkpoint`.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Dict, List, Union

from mlip import checkpoint

EMT_ELEMENTS = ["Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt"]

#: name → file name of a trained checkpoint inside ``mlip/models/pretrained/``
TRAINED: Dict[str, str] = {
    "platonic-emt": "platonic-emt.safetensors",
    "equiformer_v3-emt": "equiformer_v3-emt.safetensors",
    "embedded-atom-emt": "embedded-atom-emt.safetensors",
    "equiformer_v3-chgnet": "equiformer_v3-chgnet.safetensors",
    "equiformer_v3-sige": "equiformer_v3-sige.safetensors",
    "platonic-sige": "platonic-sige.safetensors",
}

#: name → create_model arguments of an untrained (randomly initialised, fixed seed) model
UNTRAINED: Dict[str, dict] = {
    "platonic-untrained": dict(name="platonic", species=EMT_ELEMENTS, cutoff=5.0, seed=0),
}

#: the model the command line uses when ``--model`` is not given
DEFAULT_MODEL = "equiformer_v3-emt"


class UntrainedModelWarning(UserWarning):
    """Emitted when an untrained (random-weight) model is loaded."""


def pretrained_dir() -> Path:
    import mlip.models

    return Path(mlip.models.__file__).parent / "pretrained"


def available() -> List[str]:
    """Names of the shipped models."""
    return sorted(TRAINED) + sorted(UNTRAINED)


def covering(symbols) -> List[str]:
    """Names of the shipped trained models whose species include every element of ``symbols`` (read from
    the checkpoint headers, no weights loaded), the default first."""
    wanted = set(symbols)
    names = [name for name, filename in TRAINED.items()
             if wanted <= set(checkpoint.read_header(pretrained_dir() / filename)["species"])]
    return sorted(names, key=lambda name: (name != DEFAULT_MODEL, name))


def is_known(name: str) -> bool:
    return name in TRAINED or name in UNTRAINED or name == "default"


def load(name: str):
    """Load a shipped model by name (``"default"`` is :data:`DEFAULT_MODEL`)."""
    from mlip.models import create_model

    if name == "default":
        name = DEFAULT_MODEL
    if name in TRAINED:
        potential = checkpoint.load_potential(pretrained_dir() / TRAINED[name])
        potential.metadata = dict(potential.metadata, name=name)  # how it is labelled in outputs
        return potential
    if name in UNTRAINED:
        args = dict(UNTRAINED[name])
        potential = create_model(args.pop("name"), **args)
        potential.metadata = {"name": name, "trained": False, "note": "random weights (fixed seed); not physical"}
        warnings.warn(
            f"model {name!r} is UNTRAINED (random weights): its energies and forces are not physical",
            UntrainedModelWarning,
            stacklevel=2,
        )
        return potential.eval()
    raise FileNotFoundError(f"no shipped model named {name!r}; shipped models: {', '.join(available())}")


def load_potential(path_or_name: Union[str, Path]):
    """Load a potential from a checkpoint path or the name of a shipped model (an existing file of
    that name wins); this is :func:`mlip.load_potential`.

    Raises ``FileNotFoundError`` for an unknown path/name and :class:`mlip.CheckpointError` (a
    ``ValueError``) for a corrupted file, an unknown architecture or tensors that do not match the
    architecture described by the header.
    """
    if isinstance(path_or_name, str) and not os.path.exists(path_or_name) and is_known(path_or_name):
        return load(path_or_name)
    path = Path(path_or_name)
    if not path.exists():
        raise FileNotFoundError(
            f"{str(path_or_name)!r} is neither a checkpoint file nor a shipped model "
            f"(shipped models: {', '.join(available()) or 'none'})"
        )
    return checkpoint.load_potential(path)
