"""Which weights of a v2 fine-tuning to ship: its last (decayed) ones or the best epoch's by validation loss.

    python examples/datasets/sige-pbe/v2/which_weights.py examples/recipes/equiformer_v3-sige/v2/finetune-run

The validation loss of the v2 file is carried by its six compressed dimers and trimers (forces up to
48 eV/Å), which get worse as the fine-tuning goes on while the periodic frames improve, so it picks the
first epoch (examples/recipes/equiformer_v3-sige/v2/README.md, "Energies are under-fitted"). The rule:
ship ``last`` when the energy and the force MAE of the periodic validation frames are both lower with the
last weights than with the best epoch's, else ``best``. Prints both rows (float64) on stderr and the
choice on stdout (``models.sh`` reads it); measured on the validation file only, never the test file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VALID = HERE.parents[0] / "work" / "v2" / "sige-pbe-v2-valid.xyz"
KEYS = ("energy_mae_meV_per_atom", "forces_mae_meV_per_A")


def periodic_errors(checkpoint: Path, samples) -> dict:
    """Energy and force MAE of the periodic frames of ``samples`` (float64): {"n", KEYS...}."""
    from mlip.checkpoint import load_potential
    from mlip.training.evaluation import evaluate_groups

    _, groups = evaluate_groups(load_potential(checkpoint), samples,
                                lambda s: ["periodic"] if s.atoms.pbc.any() else [], batch_size=16,
                                dtype="float64")
    n, metrics = groups["periodic"]
    return {"n": n, **{key: metrics[key] for key in KEYS}}


def choose(best: dict, last: dict) -> str:
    """``last`` when both periodic errors are lower with the last weights, else ``best``."""
    return "last" if all(last[key] < best[key] for key in KEYS) else "best"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="the run folder of mlip train (best.safetensors, last.safetensors)")
    parser.add_argument("--valid", default=str(VALID), help="the validation file (default: v2's)")
    args = parser.parse_args(argv)
    from mlip.data import read_dataset

    run = Path(args.run)
    for name in ("best.safetensors", "last.safetensors"):
        if not (run / name).is_file():
            print(f"which_weights.py: {run} has no {name} (a run folder of mlip train)", file=sys.stderr)
            return 2
    samples = list(read_dataset(args.valid))
    rows = {which: periodic_errors(run / f"{which}.safetensors", samples) for which in ("best", "last")}
    for which, row in rows.items():
        print(f"{run}: {which}: {row['n']} periodic validation frames, energy "
              f"{row[KEYS[0]]:.1f} meV/atom, forces {row[KEYS[1]]:.1f} meV/Å", file=sys.stderr)
    print(choose(rows["best"], rows["last"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
