"""``mlip data label``: reference labels for a file of structures (:mod:`mlip.workflows.labelling`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional, Sequence

from mlip.cli.common import CLIError, lock_output_folder
from mlip.data.occupancy import disordered_sites, require_ordered, site_labels


def parse_setting(text: str):
    """argparse type of ``KEY=VALUE``: (KEY, VALUE read as YAML)."""
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, yaml.safe_load(value)


def build_parser(prog: str = "mlip data label") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Label structures (any file ASE reads) with a reference calculator: energy, "
        "forces and stress under REF_energy/REF_forces/REF_stress and the provenance in every frame. Sharded "
        "(--shards, or a Slurm array, or torchrun) and resumable: a rerun labels only what is missing. "
        "GPAW runs in parallel as 'mpiexec -n 2 gpaw python -m mlip data label ...'.")
    p.add_argument("input", help="structures to label (e.g. from 'mlip data structures')")
    p.add_argument("--calculator", required=True,
                   help="emt, gpaw (the package's fixed PBE settings), chgnet (the CHGNet 0.3.0 "
                        "teacher: pip install 'mlip-torch[teacher]') or an ASE calculator class "
                        "'package.module:Class'")
    p.add_argument("--setting", type=parse_setting, action="append", metavar="KEY=VALUE", default=[],
                   help="a calculator setting (repeatable): for gpaw an override of the dataset settings "
                        "(which makes a different dataset), for a class a keyword of its constructor")
    p.add_argument("--out-dir", required=True, help="folder of the per-structure results (resumable)")
    p.add_argument("-o", "--output", required=True,
                   help="extxyz file written once every structure has a result")
    p.add_argument("--shards", type=int, default=None,
                   help="number of shards (default: from the environment)")
    p.add_argument("--shard-index", type=int, default=None, help="this process's shard")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``mlip data label INPUT --calculator C --out-dir DIR -o OUT [--setting K=V ...] [--shards N ...]``."""
    import ase.io

    from mlip.io import write_json
    from mlip.workflows.labelling import label_structures, labeller, labelling_status, write_labelled

    args = build_parser().parse_args(argv)
    if not Path(args.input).is_file():
        raise CLIError(f"structure file {args.input!r} does not exist")
    try:
        structures = ase.io.read(args.input, ":")
    except Exception as err:  # ASE raises many kinds for a malformed file
        raise CLIError(f"cannot read structures from {args.input!r}: {err}") from None
    for k, atoms in enumerate(structures):  # a partially occupied site would be labelled as ASE fills it
        if disordered_sites(atoms):
            try:
                require_ordered(atoms, f"{args.input}, frame {k}", option=None,
                                labels=site_labels(args.input, k))
            except ValueError as err:
                raise CLIError(str(err)) from None
    lab = labeller(args.calculator, dict(args.setting))
    # Shards share the folder; of the MPI ranks of one GPAW calculation only the writing one locks it.
    lock_output_folder(args.out_dir, sharding=(args.shards, args.shard_index), writer=lab.is_writer)
    counts = label_structures(structures, lab, args.out_dir, n_shards=args.shards,
                              shard_index=args.shard_index, progress=not args.no_progress)
    if not lab.is_writer:
        return 0
    print(f"shard {counts['shard'] + 1}/{counts['n_shards']}: {counts['assigned']} structures, "
          f"{counts['skipped']} already labelled, {counts['computed']} computed, {counts['failed']} failed")
    done, failed, missing = labelling_status(structures, args.out_dir)
    write_json(Path(args.out_dir) / "failures.json", {"failed": [{"id": i, "error": e} for i, e in failed]})
    for item_id, error in failed[:10]:
        print(f"failed: {item_id}: {error.splitlines()[0] if error else ''}")
    if len(failed) > 10:
        print(f"... {len(failed) - 10} more failures in {Path(args.out_dir) / 'failures.json'}")
    if missing:
        print(f"{done} of {len(structures)} structures labelled, {len(missing)} not yet (other shards, or "
              f"rerun to finish); {args.output} is written when every structure has a result")
        return 0
    written = write_labelled(structures, args.out_dir, args.output)[0]
    note = f"; {len(failed)} failed (listed above and in failures.json, not in the file)" if failed else ""
    print(f"wrote {written} labelled structures to {args.output}{note}")
    return 0
