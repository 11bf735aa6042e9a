"""The MACE side of ``mace_baseline.py``; runs with the *MACE virtualenv's* Python (never imports mlip).

    python mace_helper.py train --budget-s SECONDS --report budget.json -- <mace_run_train arguments>
    python mace_helper.py predict --model M.model --structures test.xyz --out preds.json   # float64
    python mace_helper.py time --model M.model --structures cells.xyz --out times.json     # float32
    python mace_helper.py fresh --out M.model --numbers 14 32 -- <mace_run_train arguments>

``train`` runs MACE's own ``mace_run_train`` (``mace.cli.run_train.main``) in this process with a
wall-clock budget, because MACE only knows a number of epochs:

* the clock starts when MACE's training loop starts (``mace.tools.train``: after data loading, E0s and
  statistics; the loop's first validation pass counts), as ``mlip train``'s ``max_minutes`` does;
* when the budget is spent, the epoch that is running stops after its current batch (never before the
  first batch); MACE then validates that (possibly partial) epoch and checkpoints it if the validation
  loss improved, exactly as after a full epoch; the next epoch is not started;
* MACE then finishes as usual: it loads its best checkpoint (with ``--ema``, the averaged weights) and
  saves ``<work_dir>/<name>.model``. Its error tables on the training and validation sets and the
  TorchScript copy are skipped (CPU time nobody reads here) unless ``--keep-tables``.

Nothing is killed, so no checkpoint can be left half-written (MACE deletes the old checkpoint before
writing the new one). Threads: torch's default, i.e. ``OMP_NUM_THREADS`` from the environment.

``fresh`` saves an untrained model of the architecture the arguments describe (MACE's own parser and
``configure_model``, as ``mace_run_train`` builds it, for the elements ``--numbers``), with placeholder
E0s, shift and scale: its cost per step is that of a trained model of those hyper-parameters, which
is what the timings need when no trained model file is at hand (its energies mean nothing).
"""

from __future__ import annotations

import argparse
import json
import sys
import time


class _BudgetSpent(Exception):
    pass


def cmd_train(args, mace_args):
    import importlib
    import importlib.metadata

    import torch

    import mace.tools
    import mace.cli.run_train as run_train

    train_mod = importlib.import_module("mace.tools.train")
    original_train = train_mod.train
    original_epoch = train_mod.train_one_epoch
    state = {"deadline": None, "t0": None, "stop": False, "epochs_started": 0, "batches": 0,
             "batches_last_epoch": 0, "batches_per_epoch": None}

    class _UntilDeadline:
        def __init__(self, loader):
            self.loader = loader

        def __len__(self):
            return len(self.loader)

        def __iter__(self):
            state["batches_last_epoch"] = 0
            for batch in self.loader:
                if state["batches"] > 0 and time.time() >= state["deadline"]:
                    state["stop"] = True
                    return
                state["batches"] += 1
                state["batches_last_epoch"] += 1
                yield batch

    def budget_epoch(*a, **kw):
        if state["stop"] or (state["batches"] > 0 and time.time() >= state["deadline"]):
            state["stop"] = True
            raise _BudgetSpent()
        state["epochs_started"] += 1
        if "data_loader" in kw:
            state["batches_per_epoch"] = len(kw["data_loader"])
            kw["data_loader"] = _UntilDeadline(kw["data_loader"])
        return original_epoch(*a, **kw)

    def budget_train(*a, **kw):
        state["t0"] = time.time()
        state["deadline"] = state["t0"] + args.budget_s
        try:
            original_train(*a, **kw)
        except _BudgetSpent:
            pass
        state["train_s"] = time.time() - state["t0"]

    train_mod.train_one_epoch = budget_epoch
    mace.tools.train = budget_train  # run_train calls tools.train(...)
    if not args.keep_tables:
        run_train.create_error_table = lambda *a, **kw: "(skipped by mace_helper.py)"

        class _NoCompile:
            @staticmethod
            def compile(*a, **kw):
                raise RuntimeError("TorchScript copy skipped by mace_helper.py")

        run_train.jit = _NoCompile
    sys.argv = ["mace_run_train"] + list(mace_args)
    t_start = time.time()
    run_train.main()
    bpe = state["batches_per_epoch"] or 0
    report = {
        "budget_s": args.budget_s,
        "train_loop_s": state.get("train_s"),
        "total_s": time.time() - t_start,
        "epochs_started": state["epochs_started"],
        "last_epoch_batches": state["batches_last_epoch"],
        "batches_per_epoch": bpe,
        "batches": state["batches"],
        "epochs_equivalent": state["batches"] / bpe if bpe else None,
        "stopped_by_budget": state["stop"],
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "mace": importlib.metadata.version("mace-torch"),
        "mace_args": list(mace_args),
    }
    with open(args.report, "w") as fh:
        json.dump(report, fh, indent=1)


def _calculator(model, dtype):
    from mace.calculators import MACECalculator

    return MACECalculator(model_paths=model, device="cpu", default_dtype=dtype)


def cmd_predict(args):
    import ase.io
    import numpy as np
    import torch

    calc = _calculator(args.model, "float64")
    out = []
    for atoms in ase.io.read(args.structures, index=":"):
        a = atoms.copy()
        a.calc = calc
        energy = float(a.get_potential_energy())
        forces = np.asarray(calc.results["forces"]).tolist()
        stress = None
        if a.cell.rank == 3 and calc.results.get("stress") is not None:
            stress = np.asarray(calc.results["stress"]).reshape(-1).tolist()
        out.append({"energy": energy, "forces": forces, "stress": stress})
    n_params = sum(p.numel() for p in calc.models[0].parameters())
    with open(args.out, "w") as fh:
        json.dump({"predictions": out, "n_parameters": int(n_params), "torch_threads": torch.get_num_threads()}, fh)


def cmd_time(args):
    import ase.io
    import numpy as np
    import torch

    calc = _calculator(args.model, "float32")
    rows = []
    for atoms in ase.io.read(args.structures, index=":"):
        atoms = atoms.copy()
        atoms.calc = calc
        rng = np.random.default_rng(0)
        times, cpu = [], []
        for k in range(args.warmup + args.repeats):
            # move the atoms (σ = 1e-3 Å) so nothing is cached and the neighbour list is rebuilt, as in MD
            atoms.positions += rng.normal(scale=1e-3, size=atoms.positions.shape)
            t0, c0 = time.perf_counter(), time.process_time()
            atoms.get_potential_energy()
            atoms.get_forces()
            atoms.get_stress()
            if k >= args.warmup:
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
        rows.append({"atoms": len(atoms), "formula": atoms.get_chemical_formula(),
                     "s_per_step": float(np.median(times)), "all_s": times,
                     "cpu_s_per_step": float(np.median(cpu))})
    with open(args.out, "w") as fh:
        json.dump({"rows": rows, "torch_threads": torch.get_num_threads(), "torch": torch.__version__}, fh, indent=1)


def cmd_fresh(args, mace_args):
    import numpy as np
    import torch
    from mace.tools import AtomicNumberTable, build_default_arg_parser, check_args
    from mace.tools.model_script_utils import configure_model

    margs, _ = check_args(build_default_arg_parser().parse_args(mace_args))
    torch.set_default_dtype(getattr(torch, margs.default_dtype))
    # what mace_run_train sets from the data and the loss before configure_model (none changes the cost)
    margs.compute_avg_num_neighbors, margs.mean, margs.std = False, 0.0, 1.0
    margs.compute_energy = margs.compute_forces = True
    margs.compute_dipole = margs.compute_polarizability = False
    z_table = AtomicNumberTable(sorted(args.numbers))
    model, _ = configure_model(margs, None, np.zeros(len(args.numbers)), z_table=z_table, heads=["Default"])
    torch.save(model.eval(), args.out)
    n_parameters = sum(p.numel() for p in model.parameters())
    print(json.dumps({"model": type(model).__name__, "n_parameters": n_parameters,
                      "hidden_irreps": str(margs.hidden_irreps)}))


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    mace_args = []
    if "--" in argv:
        cut = argv.index("--")
        argv, mace_args = argv[:cut], argv[cut + 1:]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--budget-s", type=float, required=True)
    t.add_argument("--report", required=True)
    t.add_argument("--keep-tables", action="store_true")
    q = sub.add_parser("predict")
    q.add_argument("--model", required=True)
    q.add_argument("--structures", required=True)
    q.add_argument("--out", required=True)
    r = sub.add_parser("time")
    r.add_argument("--model", required=True)
    r.add_argument("--structures", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--warmup", type=int, default=2)
    r.add_argument("--repeats", type=int, default=10)
    f = sub.add_parser("fresh")
    f.add_argument("--out", required=True)
    f.add_argument("--numbers", type=int, nargs="+", required=True)
    args = p.parse_args(argv)
    if args.cmd == "fresh":
        cmd_fresh(args, mace_args)
    elif args.cmd == "train":
        cmd_train(args, mace_args)
    elif args.cmd == "predict":
        cmd_predict(args)
    else:
        cmd_time(args)


if __name__ == "__main__":
    main()
