"""Matbench Discovery (IS2RE-SR) with any ASE calculator, and a miniature offline version of it.

The pipeline, one module per step:

* :mod:`.inputs` reads the structures, entries and reference tables in the formats the benchmark
  distributes (pandas JSON of pymatgen structures or ComputedStructureEntries, plain or compressed;
  ASE-readable files such as extxyz with ``material_id`` in ``atoms.info``; JSON lines);
* :mod:`.relax_campaign` relaxes every material (FIRE + FrechetCellFilter), sharded and resumable;
* :mod:`.formation` turns energies into formation energies per atom (MP2020 corrections on
  ComputedStructureEntries, or plain elemental references);
* :mod:`.join` merges the shards into the submission files;
* :mod:`.metrics` scores them (F1, DAF, MAE, ... on hull distances; RMSD; CPS);
* :mod:`.mini_benchmark` is the machinery of a miniature benchmark in which a calculator plays DFT;
  :mod:`.emt_benchmark` is its recipe with ASE's EMT over seven fcc metals and :mod:`.teacher_benchmark`
  its recipe with any calculator (a teacher) over binary systems;
* :mod:`mlip.cli.discovery` is ``mlip discovery {relax, join, metrics, emt-benchmark, teacher-benchmark}``.
"""

from mlip.workflows.discovery.formation import formation_energies, read_elemental_references
from mlip.workflows.discovery.inputs import read_reference_table, read_structures
from mlip.workflows.discovery.join import join_discovery
from mlip.workflows.discovery.metrics import discovery_metrics
from mlip.workflows.discovery.relax_campaign import run_discovery_relax

__all__ = [
    "discovery_metrics",
    "formation_energies",
    "join_discovery",
    "read_elemental_references",
    "read_reference_table",
    "read_structures",
    "run_discovery_relax",
]
