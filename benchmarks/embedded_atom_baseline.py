"""How far the embedded-atom term alone gets on EMT data: a baseline for the two transformers.

    python benchmarks/embedded_atom_baseline.py --train emt-train.xyz --test emt-test.xyz --minutes 5 \\
        [--epochs 60] [--lr 0.01] [--cutoff 5.0] [--out embedded-atom-run/]

Trains the ``embedded_atom`` architecture (:class:`mlip.models.embedded_atom.EmbeddedAtomModel`: nothing
but :class:`mlip.embedded_atom.EmbeddedAtomEnergy`, E_i = MLP(Z_i, element-resolved neighbour densities),
the embedded-atom form; ASE's EMT is itself a function of two such densities per atom) with the package's
own pipeline: the shipped stage-1 loss (energy 5, forces 10, stress 3, squared error), isolated-atom
reference energies, AdamW with warm-up and cosine decay over ``--epochs``, stopping after the epoch that
passes ``--minutes``; validation on 10 % of ``--train`` (seed 0, by structure group, the split the shipped
models used). Prints the test errors in float64 and the parameter count. The same model trained by
``examples/train_embedded_atom_emt.yaml`` is the first stage of the shipped ``platonic-emt`` (the
transformer then starts from it through ``init_embedded_atom_from``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--test", required=True)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--cutoff", type=float, default=5.0, help="Å (EMT's pair weights reach 5.4-5.9 Å)")
    parser.add_argument("--out", default="embedded-atom-run")
    args = parser.parse_args()

    import ase.io

    from mlip.training import TrainConfig, train
    from mlip.training.evaluation import evaluate

    config = TrainConfig.from_dict(dict(
        model=dict(name="embedded_atom", species=["Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt"],
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
