"""The model a run starts from: the architecture of ``config.model``, its starting weights (a
checkpoint's with ``init_from``, grown deeper with ``init_grow``; an embedded-atom checkpoint's with
``init_embedded_atom_from``; else the seed's), its reference energies and output scale.
"""

from __future__ import annotations

from pathlib import Path

import torch

from mlip.training.config import TrainConfig
from mlip.training.distributed import Distributed
from mlip.training.reference_energies import fit_reference_energies, isolated_atom_energies, output_scale

#: hyperparameters that choose how the same weights are evaluated, not which weights there are: a
#: checkpoint shipped with one (the Platonic Transformer averaged over its cosets in a larger group) starts
#: a run of the config's form (e.g. not averaged, 5× cheaper to train; the card ships it averaged again)
EVALUATION_ONLY = ("average_over",)


def _refuse_differences(where: str, checks) -> None:
    """ValueError naming the first ``(what, config's model, checkpoint)`` pair whose two values differ."""
    for what, mine, theirs in checks:
        if mine != theirs:
            raise ValueError(f"{where}: its {what} ({theirs}) differs from the config's model ({mine})")


def load_initial_weights(potential, source: str, grow: bool = False) -> None:
    """Copy the weights of checkpoint ``source`` into ``potential`` (``init_from``), refusing a
    checkpoint of another architecture, species, cutoff or hyperparameters (but those of
    :data:`EVALUATION_ONLY`: the run trains the config's form of the same weights).

    With ``grow`` (``init_grow``) the checkpoint may have fewer transformer blocks than
    ``potential``: they fill the first blocks, and each extra block is made the identity (the
    parameters of its ``residual_outputs()`` zeroed), so the grown potential starts with the
    checkpoint's energies.
    """
    from mlip.pretrained import load_potential

    start = load_potential(source)
    mine_hp, theirs_hp = dict(potential.hyperparameters), dict(start.hyperparameters)
    n_mine, n_theirs = mine_hp.get("num_layers"), theirs_hp.get("num_layers")
    if grow:
        if n_mine is None or n_theirs is None:
            raise ValueError(f"init_grow: the {potential.architecture} model has no num_layers to grow")
        if n_theirs > n_mine:
            raise ValueError(f"init_grow from {source!r}: it has {n_theirs} blocks, more than the config's "
                             f"model ({n_mine}); a model can only be grown deeper")
        mine_hp["num_layers"] = theirs_hp["num_layers"]  # the one difference allowed
    for key in EVALUATION_ONLY:
        mine_hp.pop(key, None)
        theirs_hp.pop(key, None)
    _refuse_differences(f"init_from {source!r}", (
        ("architecture", potential.architecture, start.architecture),
        ("species", potential.atomic_numbers.tolist(), start.atomic_numbers.tolist()),
        ("cutoff", float(potential.cutoff), float(start.cutoff)),
        ("hyperparameters", mine_hp, theirs_hp),
        ("terms", potential.term_specs, start.term_specs)))
    # The reference energies travel with the state dict; whether they are isolated-atom energies does not.
    potential.isolated_reference = start.isolated_reference
    with torch.no_grad():
        if not grow or n_mine == n_theirs:
            potential.load_state_dict(start.state_dict())
            return
        missing, unexpected = potential.load_state_dict(start.state_dict(), strict=False)
        new_blocks = tuple(f"model.blocks.{i}." for i in range(n_theirs, n_mine))
        stray = [k for k in missing if not k.startswith(new_blocks)]
        if unexpected or stray:  # the block layout is not what growing assumes
            raise ValueError(f"init_grow from {source!r}: tensors do not line up (unexpected "
                             f"{unexpected[:3]}, missing outside the new blocks {stray[:3]})")
        for block in potential.model.blocks[n_theirs:]:
            for module in block.residual_outputs():
                for p in module.parameters():
                    p.zero_()


def _load_embedded_atom(potential, source: str) -> None:
    """Start ``potential``'s embedded-atom term from checkpoint ``source`` of the ``embedded_atom``
    architecture (``init_embedded_atom_from``): copy the term, output scale, reference energies (and
    whether they are isolated-atom ones), and zero the model's final readout layer."""
    from mlip.pretrained import load_potential

    where = f"init_embedded_atom_from {source!r}"
    term = potential.terms["embedded_atom"] if "embedded_atom" in potential.terms else None
    if term is None:
        raise ValueError(f"{where}: the config's {potential.architecture} model has no embedded-atom term "
                         "(declare terms: {embedded_atom: ...} in model)")
    start = load_potential(source)
    if start.architecture != "embedded_atom":
        raise ValueError(f"{where}: a checkpoint of the embedded_atom architecture is needed, this one is "
                         f"{start.architecture!r}")
    _refuse_differences(where, (("species", potential.atomic_numbers.tolist(), start.atomic_numbers.tolist()),
                                ("cutoff", float(potential.cutoff), float(start.cutoff))))
    # A term trained with other arguments (avg_neighbors or envelope_exponent included, which no tensor
    # shape shows) would compute other energies.
    from mlip.models import default_hyperparameters

    wanted = dict(potential.term_specs["embedded_atom"])
    theirs = {**default_hyperparameters("embedded_atom"), **dict(start.hyperparameters)}  # as the loader built it
    if theirs != wanted:
        raise ValueError(f"{where}: its term's hyperparameters differ from the term declared beside the model "
                         f"({theirs} vs {wanted}); train it with the arguments of the model's "
                         "terms: {embedded_atom: ...}")
    with torch.no_grad():
        term.load_state_dict(start.model.embedded_atom.state_dict())
        potential.scale.copy_(start.scale)
        potential.reference_energies.copy_(start.reference_energies)
        for p in potential.model.final_readout().parameters():
            p.zero_()
    potential.isolated_reference = start.isolated_reference


def build_potential(config: TrainConfig, dist: Distributed, train_samples: list, valid_samples: list):
    """The model of ``config.model`` with its starting weights (``init_from``,
    ``init_embedded_atom_from`` or the seed), reference energies and output scale, on the run's
    device and dtype, the embedded-atom term frozen on request. Returns (potential, output scale,
    where the scale came from)."""
    from mlip.models import create_model

    model_args = dict(config.model)
    name = model_args.pop("name")
    potential = create_model(name, seed=config.seed, **model_args)
    numbers = potential.atomic_numbers.tolist()
    isolated = config.reference_energies == "isolated_atoms"
    # None: keep the init_from checkpoint's reference energies (and whether they are isolated-atom ones)
    reference = isolated_atom_energies(train_samples + valid_samples, numbers, potential.cutoff) if isolated else None
    if config.init_from:
        load_initial_weights(potential, config.init_from, grow=config.init_grow)
        # the file's name only: the scale's origin goes into the checkpoints (no path of this machine)
        scale, scale_kind = float(potential.scale), f"kept from {Path(config.init_from).name}"
    elif config.init_embedded_atom_from:
        _load_embedded_atom(potential, config.init_embedded_atom_from)
        scale, scale_kind = float(potential.scale), f"kept from {Path(config.init_embedded_atom_from).name}"
    else:
        if reference is None:
            reference = fit_reference_energies(train_samples, numbers)
        scale, scale_kind = output_scale(train_samples, numbers, reference)
        with torch.no_grad():
            potential.scale.fill_(scale)
    if reference is not None:
        with torch.no_grad():
            potential.reference_energies.copy_(torch.tensor(reference, dtype=torch.float64))
        potential.isolated_reference = isolated
    dtype = getattr(torch, config.dtype)
    device = dist.device  # config.device, or this process's own GPU under torchrun
    potential = potential.to(device=device, dtype=dtype)

    if config.freeze_embedded_atom:
        term = potential.terms["embedded_atom"] if "embedded_atom" in potential.terms else None
        if term is None:
            raise ValueError("freeze_embedded_atom: the model has no embedded-atom term beside a network to train "
                             "(a transformer with terms: {embedded_atom: ...})")
        for p in term.parameters():
            p.requires_grad_(False)
    return potential, scale, scale_kind
