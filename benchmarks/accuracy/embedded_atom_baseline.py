"""How far the embedded-atom term alone gets on EMT data: a baseline for the two transformers.

    python benchmarks/accuracy/embedded_atom_baseline.py --train emt-train.xyz --test emt-test.xyz \\
        [--minutes 20] [--epochs 40] [--lr 0.01] [--cutoff 6.0] [--[no-]log-densities] [--out embedded-atom-run/]

Trains the ``embedded_atom`` architecture (:class:`mlip.models.embedded_atom.EmbeddedAtomModel`: nothing
but :class:`mlip.nn.EmbeddedAtomEnergy`, E_i = MLP(Z_i, element-resolved neighbour densities),
the embedded-atom form; ASE's EMT is itself a function of two such densities per atom) with the settings of
``examples/recipes/platonic-emt/stage1.yaml``, the first stage of the shipped ``platonic-emt`` (the stage-1
loss: energy 5, forces 10, stress 3, squared error; isolated-atom reference energies; AdamW with warm-up
and cosine decay; validation on 10 % of the training file, seed 0, by structure group), with the cutoff,
learning rate, epochs, wall-clock limit (stopping after the epoch that passes ``--minutes``), training file
and output folder given here, and ``--log-densities``/``--no-log-densities`` to switch the term's
logarithmic positive densities on or off (otherwise as the recipe has them). Prints
the test errors in float64 (overall, per ``config_type``, and for the dimers among the clusters, which show
most plainly how the term handles low densities) and the parameter count.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def kinds_of(atoms) -> list:
    """The test groups a structure counts in: its ``config_type``, and ``dimer (cluster)`` for a dimer."""
    kind = atoms.info.get("config_type", "?")
    return [kind, "dimer (cluster)"] if atoms.info.get("prototype") == "dimer" else [kind]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--cutoff", type=float, default=None,
                        help="Å (default: the recipe's; EMT's pair weights reach 5.4-5.9 Å)")
    parser.add_argument("--log-densities", action=argparse.BooleanOptionalAction, default=None,
                        help="the term's logarithmic positive densities on or off (default: the recipe's)")
    parser.add_argument("--out", default="embedded-atom-run")
    args = parser.parse_args()

    import ase.io

    import mlip
    from mlip.training import TrainConfig, train
    from mlip.training.evaluation import evaluate_groups
    from mlip.io import read_yaml

    # The settings of the shipped recipe's first stage, with this script's overrides.
    recipe = Path(__file__).resolve().parents[2] / "examples" / "recipes" / "platonic-emt"
    settings = read_yaml(recipe / "stage1.yaml", "training config")
    if args.cutoff is not None:
        settings["model"]["cutoff"] = args.cutoff
    if args.log_densities is not None:
        settings["model"]["log_densities"] = args.log_densities
    log_densities = bool(settings["model"].get("log_densities", False))
    settings["data"]["train"] = args.train
    settings["optimizer"]["lr"] = args.lr
    settings.update(epochs=args.epochs, out_dir=args.out, max_minutes=args.minutes)
    config = TrainConfig.from_dict(settings)
    result = train(config)
    potential = mlip.load_potential(result.best)
    test = ase.io.read(args.test, ":")
    metrics, groups = evaluate_groups(potential, test, kinds_of, dtype="float64")
    by_kind = {kind: {"n": n, "energy_mae_meV_per_atom": m["energy_mae_meV_per_atom"]}
               for kind, (n, m) in groups.items()}
    last = result.history[-1]
    cutoff = float(settings["model"]["cutoff"])
    summary = {"cutoff": cutoff, "log_densities": log_densities, "parameters": potential.num_parameters(),
               "epochs": len(result.history), "minutes": round(last["minutes"], 2), "test": metrics,
               "energy_by_kind": by_kind}
    Path(args.out, "test_metrics.json").write_text(json.dumps(summary, indent=1))
    print(f"embedded-atom model, cutoff {cutoff} Å, log densities {'on' if log_densities else 'off'}, "
          f"{summary['parameters']} parameters, {summary['epochs']} epochs in "
          f"{summary['minutes']} min: test MAE {metrics['energy_mae_meV_per_atom']:.2f} meV/atom, "
          f"{metrics['forces_mae_meV_per_A']:.1f} meV/Å, {metrics['stress_mae_meV_per_A3']:.2f} meV/Å³")
    for kind, row in by_kind.items():
        print(f"  {kind:16s} {row['n']:4d} structures, energy MAE {row['energy_mae_meV_per_atom']:.1f} meV/atom")


if __name__ == "__main__":
    main()
