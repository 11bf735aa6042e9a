"""Make a model card from a training run: ship the weights, measure them, write ``NAME.json`` and ``NAME.md``.

:class:`CardSettings` holds what the card states beyond what is measured (its name, commands, domain,
targets, the reports it quotes); :func:`make_model_card` measures and writes. ``mlip card`` is the command.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import torch

from mlip.workflows.model_card.curve import learning_curve, plot_learning_curve
from mlip.workflows.model_card.markdown import EMT_TEST, format_model_card, speed_section
from mlip.workflows.model_card.measure import (
    KEYS,
    MD_CELLS,
    card_sample_of,
    embedded_atom_share,
    errors,
    md_step_speed,
    rotation_spread,
    speed_structures,
    training_stages,
    training_throughput,
)
from mlip.workflows.model_card.quotes import (
    quote_dft_validation,
    quote_label_floor,
    quote_label_noise,
    quote_mace_baseline,
    quote_student_vs_teacher,
)
from mlip.workflows.model_card.targets import read_targets

PathLike = Union[str, os.PathLike]

#: the shipped cards' test set: what ``-n 500`` gave before the generator had its compressed category
TEST_COMMAND = ("mlip data emt emt-test.xyz --seed 1 --count crystal=58 --count ordered_alloy=58 "
                "--count random_alloy=92 --count vacancy=50 --count surface=92 --count md=100 "
                "--count cluster=50")
#: the Platonic options that change how the weights are evaluated, not the weights, and their choices
SHIPPED_AS = {"orientation": None, "average_over": ("none", "octahedral", "icosahedral")}


@dataclass
class CardSettings:
    """What a card says about its model beyond what it measures.

    Attributes:
        name: the model's name (the files ``NAME.safetensors``, ``NAME.json``, ``NAME.md``).
        test: the labelled test file; errors overall and per ``config_type``.
        train_commands: the training command of each stage, in order (one per run folder).
        earlier_stages: the run folders of the stages before the last (``init_from`` chain), in order.
        summary: the card's first paragraph.
        test_command: the command that made ``test``.
        train_data_command: the command that made the training data.
        train_threads: the machine the model trained on, in words.
        reference: what the model imitates; a model of another reference than EMT states ``domain``.
        domain: the domain-of-validity paragraph (default: EMT's).
        targets: test MAE target per quantity (``energy``, ``forces``, ``stress``; None for none).
        test_description: how the test set was drawn.
        card_sample: a labelled file of the repository (path relative to it) as the card sample, instead
            of the EMT generator's ``sample_n`` structures of seed ``sample_seed``.
        sample_n: the EMT card sample's size.
        sample_seed: the EMT card sample's seed.
        speed_cells: the cells of the MD-step speed (:func:`.measure.speed_structures`).
        orientation: Platonic only: ship the weights with this group orientation (e.g. ``generic``).
        average_over: Platonic only: ship the weights with this coset average (``none`` for none).
        student_vs_teacher: ``student_vs_teacher.json`` of ``benchmarks/accuracy/student_vs_teacher.py``.
        student_vs_teacher_command: the command that wrote it.
        dft_validation: ``dft_validation.json`` of ``benchmarks/accuracy/dft_validation.py``, this model a
            method.
        dft_validation_method: this model's method there (default: the one besides the reference).
        dft_validation_command: the command that wrote it.
        mace_baseline: ``mace_baseline.json`` of ``benchmarks/accuracy/mace_baseline.py``, this model a row.
        mace_row: this model's row there (default: ``name``).
        mace_baseline_command: the command that wrote it.
        discovery: ``metrics.json`` of this model's miniature Matbench Discovery
            (``examples/discovery_emt.py``).
        discovery_command: the command that wrote it.
        label_noise: the error budget's label noise: the record of
            ``examples/datasets/sige-pbe/v2/noise.py --json`` (the data's first version against its second).
        label_noise_command: the command that wrote it (default: the record's own).
        label_floor: the error budget's residual of the labels' k-point rule: the record of
            ``benchmarks/data/kpoint_convergence.py report`` (its reference against a denser mesh).
        label_floor_command: the command that wrote it (needed: the study's record names none).
        targets_file: a JSON of the model's targets (:mod:`.targets`): its test targets replace
            ``targets``, its property targets the defaults, and the card opens with every target met,
            missed or not measured.
        dft_validation_beside: other methods of ``dft_validation`` (foundation models run beside this
            one) whose crystal properties the card shows next to this model's.
        weights: which weights of the (last) run folder to ship: ``"best"`` (the best epoch by validation
            loss, ``best.safetensors``) or ``"last"`` (the run's last, decayed weights, ``last.safetensors``:
            where a few frames dominate the validation loss; say why in ``summary``).
    """

    name: str
    test: PathLike
    train_commands: Sequence[str]
    earlier_stages: Sequence[PathLike] = ()
    summary: str = ""
    test_command: str = TEST_COMMAND
    train_data_command: str = "mlip data emt emt-train.xyz --seed 0"
    train_threads: str = "1 thread of a 2-core machine"
    reference: str = "EMT"
    domain: Optional[str] = None
    targets: Dict[str, Optional[float]] = field(
        default_factory=lambda: {"energy": 3.0, "forces": 20.0, "stress": 3.0})
    test_description: str = EMT_TEST
    card_sample: Optional[str] = None
    sample_n: int = 40
    sample_seed: int = 1
    speed_cells: str = "cu-au"
    orientation: Optional[str] = None
    average_over: Optional[str] = None
    student_vs_teacher: Optional[PathLike] = None
    student_vs_teacher_command: Optional[str] = None
    dft_validation: Optional[PathLike] = None
    dft_validation_method: Optional[str] = None
    dft_validation_command: str = "benchmarks/accuracy/dft_validation.py"
    mace_baseline: Optional[PathLike] = None
    mace_row: Optional[str] = None
    mace_baseline_command: str = "benchmarks/accuracy/mace_baseline.py"
    discovery: Optional[PathLike] = None
    discovery_command: Optional[str] = None
    label_noise: Optional[PathLike] = None
    label_noise_command: Optional[str] = None
    label_floor: Optional[PathLike] = None
    label_floor_command: Optional[str] = None
    targets_file: Optional[PathLike] = None
    dft_validation_beside: Sequence[str] = ()
    weights: str = "best"


def _check(run_dir: Path, settings: CardSettings) -> List[Path]:
    """The run folders of every stage, in order, once the settings are known to be complete
    (``ValueError`` otherwise, before anything is measured)."""
    stage_dirs = [Path(d) for d in settings.earlier_stages] + [run_dir]
    for stage_dir in stage_dirs:
        for name in ("best.safetensors", "metrics.json"):
            if not (stage_dir / name).is_file():
                raise ValueError(f"{stage_dir}: no {name} (a run folder of mlip train)")
    if settings.weights not in ("best", "last"):
        raise ValueError(f"weights {settings.weights!r}: best or last")
    if not (run_dir / f"{settings.weights}.safetensors").is_file():
        raise ValueError(f"{run_dir}: no {settings.weights}.safetensors (a run folder of mlip train)")
    if len(settings.train_commands) != len(stage_dirs):
        raise ValueError(f"{len(stage_dirs)} stage(s) but {len(settings.train_commands)} training command(s)")
    if settings.reference != "EMT" and not settings.domain:
        raise ValueError(f"a model of another reference than EMT ({settings.reference}) states its domain")
    if not Path(settings.test).is_file():
        raise ValueError(f"test file {str(settings.test)!r} does not exist")
    for key, choices in SHIPPED_AS.items():
        value = getattr(settings, key)
        if value is not None and choices is not None and value not in choices:
            raise ValueError(f"{key} {value!r}: one of {', '.join(choices)}")
    return stage_dirs


def _quotes(settings: CardSettings) -> dict:
    """The card's entries quoted from benchmark reports (read before anything is measured)."""
    quoted = {}
    if settings.targets_file:
        quoted["targets_file"] = read_targets(settings.targets_file)
    if settings.dft_validation_beside and not settings.dft_validation:
        raise ValueError("dft_validation_beside names methods of a dft_validation report: give that report")
    if settings.student_vs_teacher:
        command = settings.student_vs_teacher_command or "benchmarks/accuracy/student_vs_teacher.py"
        quoted["teacher"], quoted["student_discovery"] = quote_student_vs_teacher(
            Path(settings.student_vs_teacher), command, settings.reference)
    if settings.dft_validation:
        quoted["dft_validation"] = quote_dft_validation(
            Path(settings.dft_validation), settings.dft_validation_method, settings.dft_validation_command,
            quoted.get("targets_file"), settings.dft_validation_beside)
    if settings.mace_baseline:
        quoted["mace"] = quote_mace_baseline(Path(settings.mace_baseline), settings.mace_row or settings.name,
                                             settings.mace_baseline_command)
    if settings.discovery:
        d = json.loads(Path(settings.discovery).read_text())
        quoted["mini_discovery"] = {
            "command": settings.discovery_command
            or f"python examples/discovery_emt.py -n {d['n_materials']} --model {settings.name}",
            "n_materials": d["n_materials"], "metrics": d["full_test_set"], "rmsd_A": d["rmsd"]}
    budget = {}
    if settings.label_noise:
        budget["label_noise"] = quote_label_noise(Path(settings.label_noise), settings.label_noise_command)
    if settings.label_floor:
        budget["label_floor"] = quote_label_floor(Path(settings.label_floor), settings.label_floor_command)
    if budget:
        quoted["error_budget"] = budget
    return quoted


def make_model_card(run_dir: PathLike, out_dir: PathLike, settings: CardSettings,
                    root: PathLike = ".") -> dict:
    """Ship the best (or last: ``settings.weights``) weights of ``run_dir`` (the ``out_dir`` of ``mlip train``) as
    ``out_dir/NAME.safetensors``, measure them and write the card: ``NAME.json`` (every number) and
    ``NAME.md``, and the plot of the learning curve, ``NAME-learning-curve.png`` (not made, and the card
    says so, without matplotlib). ``root``: the repository, against which ``settings.card_sample`` is read.

    Measured: test errors (float64) overall and per ``config_type``; the card sample (the test suite
    checks that the shipped model still reproduces it); rotation behaviour; the network's share beside an
    embedded-atom term; MD-step speed (float32, CPU); training throughput, every stage and the learning
    curve over all of them. Returns the card's dictionary (what ``NAME.json`` holds)."""
    from mlip.checkpoint import load_potential, read_header, save_with_hyperparameters
    from mlip.data import read_dataset
    from mlip.data.emt import resolve_counts
    from mlip.io import write_json, write_text
    from mlip.training.evaluation import evaluate_groups

    run = Path(run_dir)
    stage_dirs = _check(run, settings)
    quoted = _quotes(settings)
    source = run / f"{settings.weights}.safetensors"
    trained = load_potential(source)
    for key in SHIPPED_AS:
        if getattr(settings, key) is not None and not hasattr(trained.model, key):
            raise ValueError(f"{key}: the {trained.architecture} model has no {key}")

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    weights = out / f"{settings.name}.safetensors"
    shutil.copyfile(source, weights)
    potential = load_potential(weights)
    # Platonic options that change how the weights are evaluated, not the weights: shipped as asked
    shipped_as = {}
    for key in SHIPPED_AS:
        value = getattr(settings, key)
        if value is None:
            continue
        value = None if value == "none" else value
        # (a checkpoint older than the option has it too: load_potential fills in the legacy value)
        shipped_as[key] = {"shipped": value, "trained": potential.hyperparameters.get(key)}
        potential = save_with_hyperparameters(weights, weights, **{key: value})
    header = read_header(weights)
    meta = header["metadata"]
    history = json.loads((run / "metrics.json").read_text())

    test = list(read_dataset(settings.test))
    test_metrics, groups = evaluate_groups(potential, test, lambda s: s.atoms.info.get("config_type", "?"),
                                           batch_size=16, dtype="float64")
    by_kind = (KEYS["energy"], KEYS["forces"], KEYS["energy"].replace("mae", "rmse"),
               KEYS["forces"].replace("mae", "rmse"))
    kinds = {kind: {"n": n, **{k: m[k] for k in by_kind}} for kind, (n, m) in groups.items()}
    if settings.card_sample:
        sample_entry = {"file": Path(settings.card_sample).as_posix()}
    else:
        sample_entry = {"n": settings.sample_n, "counts": resolve_counts(settings.sample_n),
                        "seed": settings.sample_seed}
    sample_samples = card_sample_of({"card_sample": sample_entry}, Path(root))
    sample_entry.update(n=len(sample_samples), metrics=errors(potential, sample_samples))

    rotations = rotation_spread(potential, test[:: max(1, len(test) // 25)][:25])
    share = embedded_atom_share(weights, test)
    speed = {label: md_step_speed(potential, atoms)
             for label, atoms in speed_structures(settings.speed_cells).items()}
    cfg = meta["training"]["config"]
    # the best epoch by validation loss, whichever weights are shipped (the shipped ones' epoch beside it)
    best_epoch = int(read_header(run / "best.safetensors")["metadata"].get("epoch", len(history)))
    shipped_epoch = int(meta.get("epoch", len(history)))
    stages = training_stages(stage_dirs)
    total_epochs = sum(st["epochs"] for st in stages)
    total_minutes = sum(st["minutes"] for st in stages)
    n_train = meta["training"]["n_train"]
    data = {
        "name": settings.name,
        "summary": settings.summary,
        "architecture": header.get("architecture", cfg["model"]["name"]),
        "n_parameters": sum(p.numel() for p in potential.parameters()),
        "cutoff": potential.cutoff,
        "training_config": cfg,
        "train_command": "\n".join(settings.train_commands),
        "train_data_command": settings.train_data_command,
        "test_command": settings.test_command,
        "test": {"n_structures": len(test), "metrics": test_metrics, "by_config_type": kinds},
        "rotation": rotations,
        "embedded_atom_share": share,
        "card_sample": sample_entry,
        "speed": {"md_atom_steps_per_s": speed, "threads": torch.get_num_threads(),
                  "cpu": platform.processor() or platform.machine()},
        "training": {"n_train": n_train, "n_valid": meta["training"]["n_valid"],
                     "epochs": total_epochs, "minutes": total_minutes, "best_epoch": best_epoch,
                     "shipped_weights": settings.weights, "shipped_epoch": shipped_epoch,
                     "structures_per_s": training_throughput(n_train, total_epochs, total_minutes),
                     "threads": settings.train_threads, "stages": stages},
    }
    if settings.reference != "EMT":
        data["reference"] = settings.reference
        data["domain"] = settings.domain
        data["test_description"] = settings.test_description
    data["targets"] = {key: settings.targets.get(key) for key in ("energy", "forces", "stress")}
    if "targets_file" in quoted:
        spec = data["targets_file"] = quoted["targets_file"]
        data["targets"] = {key: spec["test"].get(key) for key in ("energy", "forces", "stress")}
        if "near_equilibrium" in spec:
            kinds = spec["near_equilibrium"]["config_types"]
            near = [s for s in test if s.atoms.info.get("config_type") in kinds]
            data["test"]["near_equilibrium"] = {"config_types": kinds, "n": len(near),
                                                "metrics": errors(potential, near) if near else None}
    if "teacher" in quoted:
        data["teacher"] = quoted["teacher"]
        if quoted["student_discovery"]:
            data["mini_discovery"] = quoted["student_discovery"]
    for key in ("dft_validation", "mace", "error_budget"):
        if key in quoted:
            data[key] = quoted[key]
    data.update(shipped_as)
    if "mini_discovery" in quoted:
        data["mini_discovery"] = quoted["mini_discovery"]
    data["learning_curve"] = learning_curve(stage_dirs)
    plot = out / f"{settings.name}-learning-curve.png"
    not_made = plot_learning_curve(data["learning_curve"], plot, settings.name,
                                   data["training"].get("shipped_epoch"))
    if not_made:
        plot.unlink(missing_ok=True)  # an earlier card's plot is not this card's
        data["learning_curve"]["plot_not_made"] = not_made
    else:
        data["learning_curve"]["plot"] = plot.name
    write_json(out / f"{settings.name}.json", data)
    write_text(out / f"{settings.name}.md", format_model_card(data))
    return data


def remeasure_speed(folder: PathLike, name: str, compile: bool = False, repeats: int = 10) -> dict:
    """Measure the MD-step speed of the card ``folder/NAME`` again, on this machine and its torch
    threads, and write it into ``NAME.json`` and the ``## Speed`` section of ``NAME.md`` (the rest of
    both files is kept as it is). ``compile``: also time ``MLIPCalculator(compile=True)`` (its
    compilation untimed). Returns the new ``speed`` entry."""
    from mlip.checkpoint import load_potential
    from mlip.io import write_json, write_text

    folder = Path(folder)
    card, text_path = folder / f"{name}.json", folder / f"{name}.md"
    data = json.loads(card.read_text(encoding="utf-8"))
    text = text_path.read_text(encoding="utf-8")
    old_section = "\n".join(speed_section(data))
    if old_section not in text:
        raise ValueError(f"{text_path}: its Speed section is not the rendering of {card.name}'s numbers")
    labels = list(data["speed"]["md_atom_steps_per_s"])
    kinds = [kind for kind in MD_CELLS if list(speed_structures(kind)) == labels]
    if not kinds:
        raise ValueError(f"{card}: its speed cells {labels} are none of the cards' cells")
    structures = speed_structures(kinds[0])
    potential = load_potential(folder / f"{name}.safetensors")  # as shipped (orientation, average)
    speed = {"md_atom_steps_per_s": {label: md_step_speed(potential, atoms, repeats)
                                     for label, atoms in structures.items()}}
    if compile:
        speed["compiled_md_atom_steps_per_s"] = {
            label: md_step_speed(potential, atoms, repeats, compile=True)
            for label, atoms in structures.items()}
    speed.update(threads=torch.get_num_threads(), cpu=platform.processor() or platform.machine(),
                 measured=f"{time.strftime('%Y-%m-%d')} with torch {torch.__version__.split('+')[0]}")
    data["speed"] = speed
    write_json(card, data)
    write_text(text_path, text.replace(old_section, "\n".join(speed_section(data))))
    return speed
