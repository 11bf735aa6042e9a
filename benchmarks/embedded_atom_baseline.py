"""How far the embedded-atom term alone gets on EMT data: a baseline for the two transformers.

    python benchmarks/embedded_atom_baseline.py --train emt-train.xyz --test emt-test.xyz --minutes 5 \\
        [--epochs 60] [--lr 0.01] [--cutoff 5.0] [--out embedded-atom-run/]

Trains a model that is nothing but :class:`mlip.embedded_atom.EmbeddedAtomEnergy` (E_i = MLP(Z_i,
element-resolved neighbour densities), the embedded-atom form; ASE's EMT is itself a function of two
such densities per atom) with the package's own pipeline: the shipped stage-1 loss (energy 5, forces 10,
stress 3, squared error), isolated-atom reference energies, AdamW with warm-up and cosine decay over
``--epochs``, stopping after the epoch that passes ``--minutes``; validation on 10 % of ``--train``
(seed 0, by structure group, the split the shipped models used). Prints the test errors in float64 and the
parameter count. The architecture is registered here only (``embedded_atom_baseline``), not shipped.

    python benchmarks/embedded_atom_baseline.py --init-for CONFIG.yaml --from RUN/best.safetensors --out INIT.safetensors

writes a checkpoint for ``CONFIG.yaml``'s model (which must have ``embedded_atom: true``, same species and
cutoff) whose embedded-atom term, output scale and reference energies are the trained baseline's and whose
last readout layer is zero, so that it starts with exactly the baseline's energies; ``init_from: INIT.safetensors``
in that config then trains the transformer on top of the fitted term.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch import nn

from mlip.embedded_atom import EmbeddedAtomEnergy


class EmbeddedAtomModel(nn.Module):
    """The model interface (species, edge_index, edge_vectors, batch, n_graphs) → energies [N] around one
    :class:`EmbeddedAtomEnergy`."""

    def __init__(self, num_species: int, cutoff: float, num_radial: int = 16, num_densities: int = 16,
                 hidden: int = 64):
        super().__init__()
        self.term = EmbeddedAtomEnergy(num_species, cutoff, num_radial, num_densities, hidden)

    def forward(self, species, edge_index, edge_vectors, batch, n_graphs):
        return self.term(species, edge_index, edge_vectors)


def _register() -> None:
    from mlip.models import register_architecture

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    register_architecture("embedded_atom_baseline", f"{Path(__file__).stem}:EmbeddedAtomModel")


def init_checkpoint(config_path: str, source: str, out: str) -> None:
    """Transplant the trained term of ``source`` into a fresh model of ``config_path`` (see the docstring)."""
    import yaml

    import mlip
    from mlip.models import create_model

    _register()
    base = mlip.load_potential(source)
    model_args = dict(yaml.safe_load(Path(config_path).read_text())["model"])
    potential = create_model(model_args.pop("name"), seed=0, **model_args)
    if getattr(potential.model, "embedded_atom", None) is None:
        raise ValueError(f"{config_path}: the model has no embedded-atom term (set embedded_atom: true)")
    if potential.atomic_numbers.tolist() != base.atomic_numbers.tolist() or potential.cutoff != base.cutoff:
        raise ValueError(f"{config_path}: species or cutoff differ from {source}'s")
    with torch.no_grad():
        potential.model.embedded_atom.load_state_dict(base.model.term.state_dict())
        potential.scale.copy_(base.scale)
        potential.reference_energies.copy_(base.reference_energies)
        last = potential.model.readout2 if hasattr(potential.model, "readout2") else potential.model.energy_head[-1]
        for p in last.parameters():
            p.zero_()
    potential.isolated_reference = base.isolated_reference
    mlip.save_potential(potential, out)
    print(f"wrote {out}: {config_path}'s model with the embedded-atom term of {source}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train")
    parser.add_argument("--test")
    parser.add_argument("--init-for", metavar="CONFIG", help="write an init_from checkpoint for CONFIG's model")
    parser.add_argument("--from", dest="source", help="the trained baseline (with --init-for)")
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--cutoff", type=float, default=5.0, help="Å (EMT's pair weights reach 5.4-5.9 Å)")
    parser.add_argument("--out", default="embedded-atom-run")
    args = parser.parse_args()
    if args.init_for:
        if not args.source:
            parser.error("--init-for needs --from RUN/best.safetensors")
        init_checkpoint(args.init_for, args.source, args.out)
        return
    if not (args.train and args.test):
        parser.error("--train and --test are required")

    import ase.io

    from mlip.training import TrainConfig, train
    from mlip.training.evaluation import evaluate

    _register()
    config = TrainConfig.from_dict(dict(
        model=dict(name="embedded_atom_baseline", species=["Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt"],
                   cutoff=args.cutoff),
        reference_energies="isolated_atoms",
        data=dict(train=args.train, valid_fraction=0.1),
        loss=dict(energy_weight=5.0, forces_weight=10.0, stress_weight=3.0, kind="mse"),
        optimizer=dict(lr=args.lr, weight_decay=0.001, warmup_fraction=0.03, min_lr_factor=0.02, ema_decay=0.99),
        augment_rotations=False, epochs=args.epochs, batch_size=8, seed=0, dtype="float32", eval_dtype="float32",
        out_dir=args.out, max_minutes=args.minutes))
    result = train(config)
    import mlip

    potential = mlip.load_potential(result.best)
    metrics = evaluate(potential, ase.io.read(args.test, ":"), dtype="float64")
    last = result.history[-1]
    summary = {"cutoff": args.cutoff, "parameters": potential.num_parameters(), "epochs": len(result.history),
               "minutes": round(last["minutes"], 2), "test": metrics}
    Path(args.out, "test_metrics.json").write_text(json.dumps(summary, indent=1))
    print(f"embedded-atom model, cutoff {args.cutoff} Å, {summary['parameters']} parameters, {summary['epochs']} epochs in "
          f"{summary['minutes']} min: test MAE {metrics['energy_mae_meV_per_atom']:.2f} meV/atom, "
          f"{metrics['forces_mae_meV_per_A']:.1f} meV/Å, {metrics['stress_mae_meV_per_A3']:.2f} meV/Å³")


if __name__ == "__main__":
    main()
