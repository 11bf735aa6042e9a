"""Training data: readers of labelled structures, seeded splits and an EMT reference-data generator.

* :func:`read_dataset` reads extended XYZ (``.xyz``/``.extxyz``, optionally gzipped), ASE databases
  (``.db``) and MPtrj JSON (``.json``/``.json.gz``, streamed) into :class:`Sample` objects, as a list or,
  with ``stream=True``, a generator.
* :class:`Sample`: ``atoms`` (``ase.Atoms``), ``energy`` (eV), ``forces`` ([n_atoms, 3], eV/Å), ``stress``
  ([6] Voigt xx, yy, zz, yz, xz, xy in eV/Å³ with ASE's sign, or ``None``), ``source``, ``index``,
  ``group``, ``frame_id``.
* :func:`split_dataset`: seeded, disjoint, complete train/validation/test splits, optionally grouped;
  :func:`train_valid_split`: the training's (train, valid) split, grouped when samples have groups.
* :func:`generate_emt_dataset` (module :mod:`mlip.data.emt`): EMT-labelled metals and alloys.
"""

from mlip.data.readers import FORMATS, detect_format, iter_ase_db, iter_extxyz, read_dataset
from mlip.data.sample import Sample, write_extxyz
from mlip.data.splits import split_dataset, split_indices, train_valid_split
from mlip.data.summary import format_summary, summarize


def __getattr__(name):
    # Lazy: the MPtrj reader and the EMT generator are only imported when used.
    if name in ("iter_mptrj", "structure_from_dict", "KBAR_TO_EV_PER_A3"):
        from mlip.data import mptrj

        return getattr(mptrj, name)
    if name == "generate_emt_dataset":
        from mlip.data.emt import generate_emt_dataset

        return generate_emt_dataset
    raise AttributeError(f"module 'mlip.data' has no attribute {name!r}")


__all__ = [
    "FORMATS",
    "KBAR_TO_EV_PER_A3",
    "Sample",
    "detect_format",
    "format_summary",
    "generate_emt_dataset",
    "iter_ase_db",
    "iter_extxyz",
    "iter_mptrj",
    "read_dataset",
    "split_dataset",
    "split_indices",
    "structure_from_dict",
    "summarize",
    "train_valid_split",
    "write_extxyz",
]
