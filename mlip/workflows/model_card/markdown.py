"""A model card as Markdown, from the dictionary that :func:`mlip.workflows.model_card.make_model_card`
measures (and writes as JSON beside it): use, domain, test errors, rotations, card sample, the error budget,
the quoted benchmarks, speed, model and training with its learning curve."""

from __future__ import annotations

import json
from collections import defaultdict

from mlip.workflows.model_card.curve import shipped_index
from mlip.workflows.model_card.measure import KEYS, UNIT, training_throughput
from mlip.workflows.model_card.quotes import PHONON_TARGET_THZ
from mlip.workflows.model_card.targets import property_met, property_target_text, target_rows

#: the three quantities of every error table, in order
QUANTITIES = ("energy", "forces", "stress")
#: the domain paragraph of a model trained on EMT (``--reference EMT``, the default)
EMT_DOMAIN = (
    "Trained on ASE's EMT (effective-medium theory), **not** on DFT: it reproduces EMT, a model "
    "potential, for the 7 elements Al, Cu, Ag, Au, Ni, Pd, Pt and their alloys — bulk crystals "
    "(fcc, bcc, hcp, ordered L1₂/L1₀/B2/… and random solid solutions, strained and rattled, with "
    "vacancies, MD snapshots at 300–1500 K), surfaces (slabs) and small clusters, 1–64 atoms per cell "
    "in training. Any other element raises an error. Use it to try workflows and as a test bed, not "
    "to predict real materials.")
#: the test description of the EMT cards
EMT_TEST = "same distribution as the training data, another seed"


def wrap(text: str, width: int = 100) -> list:
    """``text`` as lines of at most ``width`` characters (Markdown paragraphs)."""
    import textwrap

    return textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False)


def fmt(value: float) -> str:
    """An error for a table: one decimal from 10 up, two below."""
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def fmt_or_dash(value) -> str:
    """:func:`fmt`, or ``—`` for a number that is not there."""
    return "—" if value is None else fmt(value)


def _throughput_by_model(stages: list, n_train: int) -> str:
    """``; by model: A x structures/s (e epochs), …`` when the stages trained different models (an
    embedded-atom term alone, then a transformer on it), else an empty string."""
    by_model = defaultdict(lambda: [0, 0.0])
    for st in stages:
        by_model[st.get("model", "?")][0] += st["epochs"]
        by_model[st.get("model", "?")][1] += st["minutes"]
    if len(by_model) < 2:
        return ""
    return "; by model: " + ", ".join(
        f"{name} {training_throughput(n_train, e, m):.1f} structures/s ({e} epochs, {m:.1f} min)"
        for name, (e, m) in by_model.items())


def teacher_section(teacher: dict | None) -> list:
    """The card's "Against the teacher" section (Markdown lines) from the quoted results of
    ``benchmarks/accuracy/student_vs_teacher.py``: κ, cost per call and errors against DFT; [] without
    them."""
    if not teacher:
        return []
    lines = ["## Against the teacher and DFT", "",
             *wrap(f"Teacher: {teacher['name']}. Measured by `{teacher['command']}`."), ""]
    kappa = teacher.get("kappa")
    if kappa:
        lines += ["κ(300 K) by the package's κ protocol, student against teacher:", "",
                  "| compound | student κ (W/(m·K)) | teacher κ (W/(m·K)) | κ_SRME |",
                  "|---|---|---|---|"]
        for name, row in kappa["compounds"].items():
            student, reference = ("—" if v is None else f"{v:.3g}"
                                  for v in (row["student"], row["teacher"]))
            srme = "—" if row["srme"] is None else f"{row['srme']:.2f}"
            lines.append(f"| {name} | {student} | {reference} | {srme} |")
        lines += ["", f"Mean κ_SRME {kappa['mean_srme']:.2f}.", ""]
    cost = teacher.get("cost")
    if cost:
        lines += [f"Cost per energy+forces+stress call on the CPU ({cost['threads']} threads, one run, "
                  "the student in float32):", "",
                  "| cell | student (ms) | teacher (ms) | teacher / student |", "|---|---|---|---|"]
        for cell, row in cost["cells"].items():
            lines.append(f"| {cell} | {1e3 * row['student_s']:.1f} | {1e3 * row['teacher_s']:.1f} | "
                         f"{row['teacher_over_student']:.1f} |")
        lines.append("")
    dft = teacher.get("dft")
    if dft:
        lines += [*wrap(f"Against DFT ({dft['what']}; energies after one constant per element):"), "",
                  "| | energy MAE (meV/atom) | force MAE (meV/Å) | stress MAE (meV/Å³) |",
                  "|---|---|---|---|"]
        for who, m in dft["errors"].items():
            lines.append(f"| {who} | " + " | ".join(fmt(m[KEYS[k]]) for k in QUANTITIES) + " |")
        lines.append("")
    return lines


def dft_section(dft: dict | None) -> list:
    """The card's "Against DFT" section (Markdown lines); [] without a quoted validation. Methods quoted
    ``beside`` the model (foundation models in the same report) get a column each."""
    if not dft:
        return []
    beside = dft.get("beside", [])
    lines = ["## Crystal properties against DFT", "",
             *wrap(f"{dft['reference']} in the dataset's settings against this model (float64)"
                   + (f" and {', '.join(beside)}" if beside else "") + f", by `{dft['command']}`:"), "",
             "| property | model | " + "".join(f"{name} | " for name in beside)
             + f"{dft['reference']} | difference | target | met |",
             "|---|---|---|---|---|---|" + "---|" * len(beside)]
    for row in dft["properties"]:
        value, ref = row["model"], row["reference"]
        diff = "—" if ref is None else (
            f"{100 * (value - ref) / abs(ref):+.1f} %" if ref else f"{value - ref:+.3g}")
        target, met = property_target_text(row), property_met(row)
        shown_ref = "—" if ref is None else f"{ref:.4g}"
        published = row.get("published") or dft["literature"].get("kappa_300K_W_per_mK", {}).get(
            row["key"].split(".")[1])
        if ref is None and row["key"].startswith("kappa.") and published:
            shown_ref = f"{published[0]:g}–{published[1]:g} (published PBE)"
        others = "".join("— | " if row["beside"].get(name) is None else f"{row['beside'][name]:.4g} | "
                         for name in beside)
        lines.append(f"| {row['label']} ({row['unit']}) | {value:.4g} | {others}{shown_ref} | {diff} | "
                     f"{target or '—'} | {_yes_no(met)} |")
    targets = dft.get("phonon_targets_THz", PHONON_TARGET_THZ)
    for element, mae in sorted(dft["phonon_frequency_mae_THz"].items(), key=lambda item: item[0] != "Si"):
        target = targets.get(element)
        aim = "— | —" if target is None else f"≤ {target:g} THz | {'yes' if mae <= target else 'no'}"
        others = "".join("— | " if dft["beside_phonon_frequency_mae_THz"][name].get(element) is None
                         else f"{dft['beside_phonon_frequency_mae_THz'][name][element]:.3g} | "
                         for name in beside)
        lines.append(f"| {element} phonon frequency MAE over the band path (THz) | {mae:.3g} | {others}— | — "
                     f"| {aim} |")
    source = dft["literature"].get("kappa_300K_W_per_mK", {}).get("source")
    if source and any(row["key"].startswith("kappa.") for row in dft["properties"]):
        lines += ["", *wrap(f"κ: no DFT third-order force constants here (too costly); the published range: "
                            f"{source}.")]
    return lines + [""]


def _yes_no(met) -> str:
    """A target met (True), missed (False) or not judged (None), for a table."""
    return "—" if met is None else ("yes" if met else "no")


def targets_section(data: dict) -> list:
    """The card's "Targets" section (Markdown lines): one row per target, met, missed or not measured,
    and the count of each; [] without a targets file."""
    rows = target_rows(data)
    if not rows:
        return []
    spec = data["targets_file"]
    met = sum(row["met"] is True for row in rows)
    missed = sum(row["met"] is False for row in rows)
    lines = ["## Targets", "",
             *wrap(f"The targets of {spec['source']}: {met} met, {missed} missed, "
                   f"{len(rows) - met - missed} not measured, of {len(rows)}. The numbers come from the "
                   "sections below (test errors in float64; crystal properties against DFT)."
                   + (f" {spec['note']}." if spec.get("note") else "")), "",
             "| target | this model | met |", "|---|---|---|"]
    lines += [f"| {row['what']} {row['target']} | {row['value']} | {_yes_no(row['met'])} |" for row in rows]
    return lines + [""]


def mace_section(mace: dict | None) -> list:
    """The card's "Against MACE" section (Markdown lines); [] without a quoted baseline."""
    if not mace:
        return []
    sizes = sorted(mace["mace"]["ms_per_step"], key=int)
    lines = ["## Against MACE (same data, same training minutes)", "",
             *wrap(f"MACE trained by its own `mace_run_train` on the same training file for "
                   f"{mace['minutes']:g} min ({mace['mace_epochs']:.1f} epochs), both evaluated on the "
                   f"{mace['n_test']} test structures (float64) and timed in one run (float32, energy + "
                   f"forces + stress per MD step; "
                   f"`{mace['command']}`):"), "",
             "| model | parameters | energy MAE (meV/atom) | force MAE (meV/Å) | stress MAE (meV/Å³) | "
             + " | ".join(f"ms/step, {n} atoms" for n in sizes) + " |",
             "|---|---|---|---|---|" + "---|" * len(sizes)]
    for who, r in (("this model", mace["model"]), ("MACE", mace["mace"])):
        errs = " | ".join("—" if r["test"][KEYS[k]] is None else fmt(r["test"][KEYS[k]]) for k in KEYS)
        lines.append(f"| {who} | {r['n_parameters']:,} | {errs} | "
                     + " | ".join(f"{r['ms_per_step'][n]:.1f}" for n in sizes) + " |")
    return lines + [""]


def _errors_section(data: dict) -> list:
    """Use, domain of validity and the test errors: overall with their targets, by kind of structure and
    by element."""
    t = data["test"]
    lines = [
        f"# {data['name']}",
        "",
        f"{data['summary']}",
        "",
        "## Use",
        "",
        "```python",
        "import mlip",
        f"atoms.calc = mlip.load_calculator({data['name']!r})   # offline, shipped in the package",
        "```",
        "",
        "## Domain of validity",
        "",
        *wrap(data.get("domain", EMT_DOMAIN)),
        "",
        "## Test errors",
        "",
        f"On {t['n_structures']} structures generated with `{data['test_command']}` "
        f"({data.get('test_description', EMT_TEST)}; float64 evaluation):",
        "",
        "| quantity | MAE | RMSE | target (MAE) | met |",
        "|---|---|---|---|---|",
    ]
    targets = data.get("targets", {"energy": 3.0, "forces": 20.0, "stress": 3.0})
    for key in QUANTITIES:
        mae = t["metrics"][KEYS[key]]
        rmse = t["metrics"][KEYS[key].replace("mae", "rmse")]
        target = targets.get(key)
        aim = "— | —" if target is None else f"≤ {target:g} {UNIT[key]} | {'yes' if mae <= target else 'no'}"
        lines.append(f"| {key} | {fmt(mae)} {UNIT[key]} | {fmt(rmse)} {UNIT[key]} | {aim} |")
    with_rmse = all(KEYS["forces"].replace("mae", "rmse") in row for row in t["by_config_type"].values())
    if with_rmse:
        lines += ["", "By kind of structure:", "", "| config_type | structures | energy MAE (meV/atom) | "
                  "energy RMSE | force MAE (meV/Å) | force RMSE |", "|---|---|---|---|---|---|"]
    else:
        lines += ["", "By kind of structure (MAE):", "", "| config_type | structures | energy (meV/atom) | "
                  "forces (meV/Å) |", "|---|---|---|---|"]
    for kind, row in sorted(t["by_config_type"].items()):
        cells = [KEYS["energy"], KEYS["forces"]]
        if with_rmse:
            cells = [KEYS["energy"], KEYS["energy"].replace("mae", "rmse"), KEYS["forces"],
                     KEYS["forces"].replace("mae", "rmse")]
        lines.append(f"| {kind} | {row['n']} | " + " | ".join(fmt(row[c]) for c in cells) + " |")
    lines += ["", "Force MAE by element (meV/Å): " + ", ".join(
        f"{k.split('_')[2]} {fmt(v)}" for k, v in sorted(t["metrics"].items()) if k.startswith("forces_mae_")
        and k.count("_") == 5), ""]
    return lines


def _measured_section(data: dict) -> list:
    """Rotation behaviour, the network's share beside an embedded-atom term, and the card sample."""
    r, s = data["rotation"], data["card_sample"]
    lines = [
        f"Rotations (float64, {r['n_structures']} test structures × {r['n_rotations']} random rotations): "
        f"energy spread {r['energy_spread_meV_per_atom_mean']:.3g} meV/atom on average (largest "
        f"{r['energy_spread_meV_per_atom_max']:.3g}), forces rotated back differ by "
        f"{r['forces_mae_meV_per_A']:.3g} meV/Å (MAE).",
        "",
    ]
    if data.get("embedded_atom_share"):
        share = data["embedded_atom_share"]
        term = share["term_alone"]
        lines += [
            f"Embedded-atom term (float64, the {share['n_structures']} test structures): with the network's "
            "final readout zeroed, so that only the term remains as trained inside this model, the energy "
            f"changes by {share['network_energy_meV_per_atom_mean_abs']:.3g} meV/atom and the force "
            f"components by {share['network_forces_meV_per_A_mean_abs']:.3g} meV/Å on average (mean absolute "
            f"change), and the term alone errs by {fmt(term[KEYS['energy']])} meV/atom, "
            f"{fmt(term[KEYS['forces']])} meV/Å and {fmt(term[KEYS['stress']])} meV/Å³ (MAE).",
            "",
        ]
    drawn = (f"the {s['n']} structures of `{s['file']}`" if "file" in s else
             f"`generate_emt_dataset({s.get('counts', s['n'])}, seed={s['seed']})`")
    m = s["metrics"]
    lines += [
        f"Card sample (checked by the test suite: {drawn}): energy MAE {m[KEYS['energy']]:.4f} meV/atom, "
        f"force MAE {m[KEYS['forces']]:.4f} meV/Å, stress MAE {m[KEYS['stress']]:.4f} meV/Å³.",
        "",
    ]
    return lines


def _rule(floor: dict, name: str | None) -> str:
    """A k-point rule of a quoted study in words: ``g8`` (Γ-centred mesh, density 8 Å⁻¹)."""
    rule = floor["rules"].get(name)
    if rule is None:
        return f"`{name}`"
    mesh = "Γ-centred" if rule["gamma_centred"] else "shifted even" if rule.get("even") else "shifted"
    return f"`{name}` ({mesh} mesh, density {rule['density']:g} Å⁻¹)"


def _floor_lines(floor: dict) -> list:
    """The error budget's paragraph on the second version's labels: the study's reference against a denser
    mesh (worst over the structures checked) and, when the chosen rule is not the reference, the rule's
    worst errors against it."""
    rows = floor["rows"]

    def worst(key):
        values = [abs(r[key]) for r in rows if r[key] is not None]
        return fmt_or_dash(max(values) if values else None)

    chosen, reference = floor["rule"], floor["reference"]
    if chosen is None:
        text = "The k-point study chose no rule (none met its targets on every kind). "
    else:
        text = f"The second version's labels (v2) use the study's rule {_rule(floor, chosen)}. "
    kinds = sorted({r["config_type"] for r in rows})
    whose = "Its" if chosen == reference else f"The study's reference {_rule(floor, reference)} has a"
    text += (f"{whose} residual against a denser mesh, {_rule(floor, floor['denser'])}, on {len(rows)} "
             "structure(s)"
             + (f" ({', '.join(kinds)})" if kinds else "") + f": |ΔE| up to {worst('dE_meV_per_atom')} "
             f"meV/atom, force MAE up to {worst('force_mae_meV_per_A')} meV/Å, stress MAE up to "
             f"{worst('stress_mae_GPa')} GPa")
    against = floor.get("rule_against_reference")
    if against:
        text += ("; the rule against the reference, worst per kind (ΔE meV/atom / force meV/Å / stress GPa): "
                 + ", ".join(f"{kind} {fmt_or_dash(c['energy_meV_per_atom'])} / "
                             f"{fmt_or_dash(c['forces_meV_per_A'])} / {fmt_or_dash(c['stress_GPa'])}"
                             for kind, c in sorted(against.items())))
    return wrap(text + f". By `{floor['command']}`.")


def error_budget_section(data: dict) -> list:
    """The card's "Error budget" section (Markdown lines): the model's test errors per kind of structure
    beside the label noise of the data's first version, and the residual of the second version's k-point
    rule; [] without an ``error_budget`` entry."""
    budget = data.get("error_budget")
    if not budget:
        return []
    lines = ["## Error budget", ""]
    noise, floor = budget.get("label_noise"), budget.get("label_floor")
    if noise:
        tested = data["test"]["by_config_type"]
        lines += [*wrap("What the labels leave to a model: the test errors per kind of structure beside the "
                        "label noise of the data's first version (v1), the same structures labelled on v1's "
                        "k-point mesh and on the second version's, a constant per element removed from the "
                        f"energies ({noise['n_compared']} structures, by `{noise['command']}`); noise in the "
                        "training labels is error no model can learn away. — where a kind has no "
                        "comparison or no test structure."), "",
                  "| config_type | test structures | test energy MAE (meV/atom) | test force MAE (meV/Å) "
                  "| v1 noise: compared | ΔE std / max (meV/atom) | force MAE (meV/Å) | stress MAE (GPa) |",
                  "|---|---|---|---|---|---|---|---|"]
        for kind in sorted(set(tested) | set(noise["kinds"])):
            t, n = tested.get(kind, {}), noise["kinds"].get(kind)
            test_cells = f"{t.get('n', 0)} | {fmt_or_dash(t.get(KEYS['energy']))} | " \
                         f"{fmt_or_dash(t.get(KEYS['forces']))}"
            noise_cells = "— | — | — | —" if n is None else (
                f"{n['n']} | {fmt_or_dash(n['energy_std_meV_per_atom'])} / "
                f"{fmt_or_dash(n['energy_max_meV_per_atom'])} | {fmt_or_dash(n['forces_mae_meV_per_A'])} | "
                f"{fmt_or_dash(n['stress_mae_GPa'])}")
            lines.append(f"| {kind} | {test_cells} | {noise_cells} |")
        lines.append("")
    if floor:
        lines += _floor_lines(floor) + [""]
    if data.get("learning_curve"):
        lines += ["The learning curve to the stopping point is under Training.", ""]
    return lines


def discovery_section(d: dict | None) -> list:
    """The card's "Miniature Matbench Discovery" section (Markdown lines); [] without its metrics."""
    if not d:
        return []
    m = d["metrics"]
    return [
        "## Miniature Matbench Discovery",
        "",
        *wrap(f"`{d['command']}` ({d.get('truth', 'EMT plays DFT')}: {d['n_materials']} candidates "
              f"{d.get('candidates', 'alloys of the 7 metals')} relaxed with FIRE + FrechetCellFilter in "
              f"float64, hull distances on the {d.get('hull', 'fixed EMT hull')}; "
              f"{int(m['TP'] + m['FN'])} of the {d['n_materials']} are stable; {d.get('truth_name', 'EMT')} "
              "itself scores F1 = 1):"),
        "",
        "| F1 | DAF | precision | recall | accuracy | MAE (eV/atom) | RMSE (eV/atom) | R² | RMSD (Å) |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {m['F1']:.3f} | {m['DAF']:.2f} | {m['Precision']:.3f} | {m['Recall']:.3f} | "
        f"{m['Accuracy']:.3f} | {m['MAE']:.4f} | {m['RMSE']:.4f} | {m['R2']:.3f} | {d['rmsd_A']:.4f} |",
        "",
    ]


def _schedule(opt: dict) -> str:
    """The learning-rate schedule in words (``cosine`` or ``wsd``, :class:`mlip.training.OptimizerConfig`)."""
    if opt.get("schedule", "cosine") == "wsd":
        return (f"warm-up {opt['warmup_epochs']:g} epoch(s), constant until the plateau rule fires, then linear "
                f"decay over {opt['decay_fraction']:g} of the epochs run to ×{opt['min_lr_factor']:g}")
    return f"warm-up {opt['warmup_fraction']:g} + cosine to ×{opt['min_lr_factor']:g}"


def _budget(cfg: dict) -> str:
    """The run's wall-clock budget as the card states it: none where it ran until its rule stopped it."""
    minutes = cfg.get("max_minutes")
    return "no wall-clock budget" if minutes is None else f"wall-clock budget {minutes} min"


def _shipped(tr: dict) -> str:
    """Which weights the card ships: the best epoch by validation loss, or the run's last ones."""
    if tr.get("shipped_weights") == "last":
        return (f"Shipped: the last, decayed weights (epoch {tr['shipped_epoch']}); best epoch by validation "
                f"loss: {tr['best_epoch']}.")
    return f"Best epoch by validation loss: {tr['best_epoch']}."


def speed_section(data: dict) -> list:
    """The ``## Speed`` section: MD-step speed (eager, and compiled where measured) and training
    throughput, with the blank line that ends it."""
    speed, tr = data["speed"], data["training"]
    stages = tr.get("stages", [])
    lines = [
        "## Speed",
        "",
        f"CPU ({speed['cpu']}, {speed['threads']} thread(s)), float32, energy + forces + stress per step:",
        "",
    ]
    for label, rate in speed["md_atom_steps_per_s"].items():
        n_atoms = int(label.split(", ")[1].split()[0])
        line = f"- {label}: {rate:,.0f} atom·steps/s ({1e3 * n_atoms / rate:.1f} ms/step)"
        compiled = speed.get("compiled_md_atom_steps_per_s", {}).get(label)
        if compiled is not None:
            line += (f"; compiled (`MLIPCalculator(compile=True)`) {compiled:,.0f} atom·steps/s "
                     f"({1e3 * n_atoms / compiled:.1f} ms/step)")
        lines.append(line)
    in_stages = f"; {len(stages)} stages" if len(stages) > 1 else ""
    lines += [
        f"- training: {tr['structures_per_s']:.1f} structures/s ({tr['n_train']} structures × {tr['epochs']} "
        f"epochs in {tr['minutes']:.1f} min, validation included, {tr['threads']}{in_stages})"
        + _throughput_by_model(stages, tr["n_train"]) + ".",
    ]
    if "measured" in speed:
        lines.append(f"- MD step measured {speed['measured']}.")
    return lines + [""]


def _speed_and_model_section(data: dict) -> list:
    """MD-step speed and training throughput, then the architecture, its hyperparameters and how the
    weights are shipped (a Platonic orientation or coset average)."""
    lines = speed_section(data) + [
        "## Model",
        "",
        f"`{data['architecture']}`, {data['n_parameters']:,} parameters, cutoff {data['cutoff']} Å. "
        "Hyperparameters:",
        "",
        "```json",
        json.dumps(data["training_config"]["model"], indent=1),
        "```",
        "",
    ]
    if "orientation" in data:
        o = data["orientation"]
        lines += [
            f"Shipped with the group orientation `{o['shipped']}` (trained as `{o['trained']}`; set by "
            f"`benchmarks/model_card.py --orientation {o['shipped']}`, same weights). Training rotates every "
            "structure at random, so its loss does not depend on the orientation; the validation errors of "
            "the training table below were measured as trained, every other number of this card as shipped.",
            "",
        ]
    if "average_over" in data:
        a = data["average_over"]
        lines += [
            f"Shipped with the coset average `{a['shipped']}` (trained with `{a['trained'] or 'none'}`; set "
            f"by `benchmarks/model_card.py --average-over {a['shipped']}`, same weights): the energy is the "
            "mean of the network over the cosets of its group in that larger group. The validation errors of "
            "the training table below were measured as trained, every other number of this card as shipped.",
            "",
        ]
    return lines


def _training_section(data: dict) -> list:
    """The data, the command of each stage, each stage's settings and validation errors, and the last
    stage's loss and optimiser."""
    tr, cfg = data["training"], data["training_config"]
    stages = tr.get("stages", [])
    if len(stages) > 1:
        from_term = ("; a transformer from an embedded-atom term trained alone, `init_embedded_atom_from`: "
                     "the term, output scale and references copied, the transformer's final readout zeroed"
                     if any(st.get("init_embedded_atom_from") for st in stages) else "")
        commands = ("Commands, one per stage (each stage starts from the best weights of the one before, "
                    f"`init_from`{from_term}):")
    else:
        commands = "Command:"
    lines = [
        "## Training",
        "",
        f"Data: `{data['train_data_command']}` ({tr['n_train']} training / {tr['n_valid']} validation "
        f"structures, split by structure group). {commands}",
        "",
        "```",
        *data["train_command"].split("\n"),
        "```",
        "",
    ]
    if len(stages) > 1:
        lines += ["| stage | model | epochs | minutes | loss weights E / F / S | lr "
                  "| validation E (meV/atom) | F (meV/Å) | S (meV/Å³) |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for k, st in enumerate(stages, 1):
            v, loss = st["validation"], st["loss"]
            lines.append(f"| {k} | {st.get('model', data['architecture'])} | {st['epochs']} "
                         f"| {st['minutes']:.1f} | {loss[0]:g} / {loss[1]:g} / {loss[2]:g} | {st['lr']:g} | "
                         + " | ".join(fmt(v[KEYS[q]]) for q in QUANTITIES) + " |")
        lines += ["", "Last stage:"]
    loss, opt = cfg["loss"], cfg["optimizer"]
    lines += [
        f"Loss weights (energy/atom, forces, stress·volume/atom) {loss['energy_weight']:g} / "
        f"{loss['forces_weight']:g} / {loss['stress_weight']:g} ({loss['kind']}); AdamW lr "
        f"{opt['lr']:g}, weight decay {opt['weight_decay']:g}, {_schedule(opt)}, clip "
        f"{opt['clip_norm']:g}, EMA {opt['ema_decay']:g}; batch {cfg['batch_size']}, "
        f"{cfg['dtype']}, rotation augmentation {'on' if cfg.get('augment_rotations') else 'off'}, "
        f"{_budget(cfg)}. {_shipped(tr)}",
        "",
    ]
    if data.get("learning_curve"):
        return lines + curve_lines(data) + [
            f"The numbers of this card are in `{data['name']}.json` beside it, measured by "
            "`benchmarks/model_card.py`.", ""]
    return lines + [
        "Validation errors per epoch are in the training run's `metrics.json`; the numbers of this card are "
        "in",
        f"`{data['name']}.json` beside it, measured by `benchmarks/model_card.py`.",
        "",
    ]


def curve_lines(data: dict) -> list:
    """The learning curve's paragraph of the Training section: its plot (or why there is none) and where
    and why the training stopped, with the validation errors of the first and last epochs."""
    curve = data["learning_curve"]
    stop = curve["stopped"]
    energy, forces = (curve[f"valid_{KEYS[q]}"] for q in ("energy", "forces"))
    plot = (f"![learning curve of {data['name']}]({curve['plot']})" if curve.get("plot")
            else f"(No plot: {curve.get('plot_not_made', 'not made')}.)")
    reason = stop["reason"] or "no reason recorded (stopped from outside the run)"
    return [
        *wrap("Learning curve: the validation MAE of every epoch of every stage against the minutes of all "
              f"stages (per epoch in `{data['name']}.json`, `learning_curve`):"),
        "",
        plot,
        "",
        *wrap(f"Stopped after epoch {stop['epoch']} (stage {stop['stage']}) at {stop['minutes']:.1f} min: "
              f"{reason}. Validation MAE at the first and last epochs: energy {fmt_or_dash(energy[0])} → "
              f"{fmt_or_dash(energy[-1])} meV/atom, forces {fmt_or_dash(forces[0])} → "
              f"{fmt_or_dash(forces[-1])} meV/Å.{_shipped_point(data)}"),
        "",
    ]


def _shipped_point(data: dict) -> str:
    """Where the shipped weights are an earlier epoch than the stopping point: that epoch's validation MAE
    (the plot's green diamond); "" otherwise."""
    curve = data["learning_curve"]
    epoch = data.get("training", {}).get("shipped_epoch")
    k = shipped_index(curve, epoch)
    if k is None:
        return ""
    energy, forces = (curve[f"valid_{KEYS[q]}"][k] for q in ("energy", "forces"))
    return (f" The shipped weights are epoch {epoch}'s (the green diamond): energy {fmt_or_dash(energy)} "
            f"meV/atom, forces {fmt_or_dash(forces)} meV/Å.")


def format_model_card(data: dict) -> str:
    """The Markdown card of ``data`` (a card's JSON), without a final newline: the measured sections, then
    the quoted benchmarks, speed, model and training."""
    lines = _errors_section(data) + targets_section(data) + _measured_section(data)
    lines += error_budget_section(data)
    lines += discovery_section(data.get("mini_discovery"))
    lines += teacher_section(data.get("teacher"))
    lines += dft_section(data.get("dft_validation"))
    lines += mace_section(data.get("mace"))
    lines += _speed_and_model_section(data) + _training_section(data)
    return "\n".join(lines)
