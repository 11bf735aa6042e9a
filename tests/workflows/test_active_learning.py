"""``mlip learn`` / :func:`mlip.workflows.active_learning.learn`: the loop end to end on EMT with tiny
committees, resuming after a kill, refusals, and the selection and rank-correlation helpers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import ase.io
import numpy as np
import pytest
import yaml
from ase.build import bulk
from ase.calculators.emt import EMT

from mlip.data.emt import generate_emt_dataset
from mlip.testing.cli import run_cli
from mlip.workflows.active_learning import learn, rank_correlation
from mlip.workflows.active_learning import explore as explore_module
from mlip.workflows.active_learning.select import select_random, select_uncertain, trust_window

#: the cheapest committee member: an embedded-atom model of a few hundred weights
TINY = {"model": {"name": "embedded_atom", "species": ["Cu"], "cutoff": 4.5, "hidden": 8, "num_radial": 4,
                  "num_densities": 2}, "batch_size": 8, "optimizer": {"lr": 0.01}}
EXPLORE = {"temperatures": [800], "md_steps": 10, "md_interval": 5, "relaxations": 1, "relax_steps": 4,
           "relax_interval": 2, "strained": 1, "rattled": 1}
SETTINGS = {"committee": 2, "epochs": 1, "finetune_epochs": 1, "label_budget": 4, "per_iteration": 2,
            "explore": EXPLORE}
STAGES = ["train", "evaluate"] + ["explore", "select", "label", "train", "evaluate"] * 2


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """(initial data, held-out data, committee config) files: EMT's small set, seven metals."""
    folder = tmp_path_factory.mktemp("learn-inputs")
    initial, heldout, config = folder / "initial.xyz", folder / "heldout.xyz", folder / "tiny.yaml"
    generate_emt_dataset(small=True, seed=0, out_path=initial, progress=False)
    frames = generate_emt_dataset(small=True, seed=1, progress=False)
    ase.io.write(heldout, frames[::3])
    config.write_text(yaml.safe_dump(TINY))
    return initial, heldout, config


def run(inputs, out_dir, resume=False, **changes):
    """:func:`learn` with the tiny settings (``changes`` on top); returns (result, its stage lines)."""
    initial, heldout, config = inputs
    lines = []
    result = learn(initial, "emt", out_dir, heldout=heldout, resume=resume, progress=False, log=lines.append,
                   settings={**SETTINGS, "model": str(config), **changes})
    return result, lines


def stage_lines(lines):
    return [line.split(":")[0].split()[-1] for line in lines if line.startswith("iteration")]


def test_two_iterations_end_to_end_from_the_command_line(inputs, tmp_path, capsys):
    initial, heldout, config = inputs
    out = tmp_path / "run"
    args = ["learn", initial, "--oracle", "emt", "--out-dir", out, "--heldout", heldout, "--model", config,
            "--epochs", 1, "--finetune-epochs", 1, "--label-budget", 4, "--per-iteration", 2,
            "--temperatures", 800,
            *sum((["--explore", f"{k}={v}"] for k, v in EXPLORE.items() if k != "temperatures"), []),
            "--no-progress"]
    t0 = time.perf_counter()
    code, stdout, stderr = run_cli(capsys, *args, "--committee", 2)
    seconds = time.perf_counter() - t0
    assert code == 0, stderr
    lines = stdout.splitlines()
    # one line per stage, in order, then the stop line and the committee
    assert stage_lines(lines) == STAGES, stdout
    assert lines[-2].startswith("stop: label budget of 4 spent; 4 labels in 2 iteration(s)")
    assert lines[-1] == f"committee: {out}/iter-002/member-0.safetensors {out}/iter-002/member-1.safetensors"
    # every iteration keeps its frames, models and metrics
    for k in (1, 2):
        folder = out / f"iter-{k:03d}"
        for name in ("pool.xyz", "selected.xyz", "labelled.xyz", "member-0.safetensors",
                     "member-1.safetensors", "metrics.json"):
            assert (folder / name).is_file(), folder / name
        pool, selected = ase.io.read(folder / "pool.xyz", ":"), ase.io.read(folder / "selected.xyz", ":")
        kinds = {f.info["config_type"] for f in pool}
        assert kinds == {"explore_md", "explore_relax", "explore_strained", "explore_rattled"}
        assert len(selected) == 2
        # the most uncertain frame of the pool is picked first
        assert selected[0].info["uncertainty"] == max(f.info["uncertainty"] for f in pool)
        # labels are the oracle's, on the selected frames
        for frame in ase.io.read(folder / "labelled.xyz", ":"):
            reference = frame.copy()
            reference.calc = EMT()
            assert frame.info["calculator"] == "emt"
            assert np.isclose(frame.info["REF_energy"], reference.get_potential_energy(), atol=1e-6)
        # warm start: each member starts from its own weights of the previous iteration
        member = folder / "training" / "member-1"
        trained = json.loads((member / "config.json").read_text())  # its paths relative to the run's folder
        previous = out / f"iter-{k - 1:03d}" / "member-1.safetensors"
        assert (member / trained["init_from"]).resolve() == previous.resolve()
        assert trained["seed"] == 1
        metrics = json.loads((folder / "metrics.json").read_text())
        assert metrics["labels"] == 2 * k and metrics["selected"] == 2
        assert metrics["heldout"]["n"] == len(ase.io.read(heldout, ":"))
        assert -1 <= metrics["heldout"]["rank_correlation"] <= 1
        assert np.isfinite(metrics["heldout"]["forces_mae_meV_per_A"])
    assert not (out / "iter-000" / "pool.xyz").exists()  # iteration 0 trains on the initial data only
    summary = json.loads((out / "summary.json").read_text())
    assert summary["labels"] == 4 and [r["iteration"] for r in summary["iterations"]] == [0, 1, 2]
    assert seconds < 120, f"the two-iteration loop took {seconds:.0f} s"  # ~30 s on two busy cores

    # a second run into the folder is refused; --resume with the same settings redoes nothing
    code, _, stderr = run_cli(capsys, *args, "--committee", 2)
    assert code == 2 and "already holds an active-learning run" in stderr and "--resume" in stderr
    code, _, stderr = run_cli(capsys, *args, "--committee", 3, "--resume")
    assert code == 2 and "settings.committee = 2, this run gives 3" in stderr, stderr
    code, stdout, stderr = run_cli(capsys, *args, "--committee", 2, "--resume", "--label-budget", 4)
    assert code == 0 and all("reused" in line for line in stdout.splitlines()[:-2]), stdout


def test_a_killed_run_resumes_each_stage_where_it_stopped(inputs, tmp_path, monkeypatch):
    out = tmp_path / "run"
    calls = []
    real_run_task = explore_module.run_task

    def dying_task(task, *args, **kwargs):
        calls.append(task.index)
        if task.index == 2 and len(calls) < 4:  # killed in the middle of iteration 1's exploration
            raise KeyboardInterrupt
        return real_run_task(task, *args, **kwargs)

    monkeypatch.setattr(explore_module, "run_task", dying_task)
    with pytest.raises(KeyboardInterrupt):
        run(inputs, out, label_budget=2)
    assert calls == [0, 1, 2]
    tasks = sorted(p.name for p in (out / "iter-001" / "explore").iterdir())
    assert tasks == ["task-000.xyz", "task-001.xyz"]  # the finished tasks, written as they ended
    assert not (out / "iter-001" / "pool.xyz").exists()
    with pytest.raises(ValueError, match="already holds an active-learning run"):
        run(inputs, out, label_budget=2)
    result, lines = run(inputs, out, label_budget=2, resume=True)
    assert calls == [0, 1, 2, 2, 3]  # the finished tasks are not run again
    assert lines[0].startswith("iteration 0 train: 2 members reused")
    assert result.labels == 2 and result.stopped.startswith("label budget")

    # killed while a member trains: the stages before are reused, the members finished are kept
    import mlip.training

    (out / "iter-001" / "member-1.safetensors").unlink()
    (out / "iter-001" / "metrics.json").unlink()
    trained = []
    real_train = mlip.training.train
    monkeypatch.setattr(mlip.training, "train", lambda config, *a, **k: trained.append(config.seed)
                        or real_train(config, *a, **k))
    result, lines = run(inputs, out, label_budget=2, resume=True)
    assert trained == [1]
    assert [line.split(":")[0] for line in lines if "reused" in line] == [
        "iteration 0 train", "iteration 0 evaluate", "iteration 1 explore", "iteration 1 select",
        "iteration 1 label"]


def test_the_budget_can_grow_on_resume_and_the_threshold_stops(inputs, tmp_path):
    out = tmp_path / "run"
    result, _ = run(inputs, out, label_budget=0)
    assert result.labels == 0 and result.stopped == "label budget of 0 spent"
    assert not (out / "iter-001").exists()
    result, lines = run(inputs, out, label_budget=2, threshold=1e3, resume=True)
    assert result.labels == 0 and "stayed below the threshold" in result.stopped
    assert (out / "iter-001" / "pool.xyz").is_file() and not (out / "iter-001" / "selected.xyz").exists()
    assert result.iterations[-1]["stopped"] == result.stopped


def test_a_loop_can_start_from_members_trained_elsewhere(inputs, tmp_path):
    first, _ = run(inputs, tmp_path / "first", label_budget=0)
    initial, heldout, config = inputs
    lines = []
    result = learn(initial, "emt", tmp_path / "second", heldout=heldout, committee=first.committee,
                   settings={**SETTINGS, "model": str(config), "label_budget": 2}, progress=False,
                   log=lines.append)
    assert lines[0] == f"iteration 0 train: 2 members copied from {first.committee[0]}, {first.committee[1]}"
    copied = tmp_path / "second" / "iter-000" / "member-0.safetensors"
    assert copied.read_bytes() == first.committee[0].read_bytes()
    assert not (tmp_path / "second" / "iter-000" / "training").exists()
    member = tmp_path / "second" / "iter-001" / "training" / "member-0"
    trained = json.loads((member / "config.json").read_text())
    assert (member / trained["init_from"]).resolve() == copied.resolve() and result.labels == 2
    # a checkpoint that cannot warm-start the configured model is refused before anything is made
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({**TINY, "model": {**TINY["model"], "hidden": 4}}))
    with pytest.raises(ValueError, match="hyperparameters"):
        learn(initial, "emt", tmp_path / "third", committee=first.committee, progress=False,
              settings={**SETTINGS, "model": str(other)})
    with pytest.raises(ValueError, match="3 committee checkpoints given for a committee of 2"):
        learn(initial, "emt", tmp_path / "third", committee=(first.committee * 2)[:3], progress=False,
              settings={**SETTINGS, "model": str(config)})
    assert not (tmp_path / "third").exists()


def test_the_first_committee_can_be_fine_tuned_from_one_pretrained_model(inputs, tmp_path, capsys):
    """--finetune-from: every member of iteration 0 starts from the one checkpoint (init_from) with its
    own seed, so the members differ; the checkpoint is recorded relative to the folder, must fit the
    model, and excludes --start-from."""
    from safetensors.numpy import load_file

    first, _ = run(inputs, tmp_path / "first", label_budget=0)
    pretrained = first.committee[0]
    lines = []
    initial, heldout, config = inputs
    result = learn(initial, "emt", tmp_path / "second", heldout=heldout, finetune_from=pretrained,
                   settings={**SETTINGS, "model": str(config), "label_budget": 0}, progress=False,
                   log=lines.append)
    assert lines[0].startswith("iteration 0 train: 2 members on ") and f"from {pretrained} ->" in lines[0]
    for k in range(2):
        member = tmp_path / "second" / "iter-000" / "training" / f"member-{k}"
        trained = json.loads((member / "config.json").read_text())
        assert (member / trained["init_from"]).resolve() == pretrained.resolve() and trained["seed"] == k
    a, b = (load_file(str(p)) for p in result.committee)
    assert any(not np.array_equal(a[name], b[name]) for name in a)  # fine-tuned apart
    record = json.loads((tmp_path / "second" / "learn.json").read_text())
    assert record["finetune_from"] == "../first/iter-000/member-0.safetensors"
    # a resume must give the same checkpoint; the two ways to start exclude each other; a misfit is refused
    with pytest.raises(ValueError, match="it was made with finetune_from"):
        learn(initial, "emt", tmp_path / "second", heldout=heldout, resume=True, progress=False,
              settings={**SETTINGS, "model": str(config), "label_budget": 0})
    with pytest.raises(ValueError, match="finetune_from and committee exclude each other"):
        learn(initial, "emt", tmp_path / "third", finetune_from=pretrained, committee=first.committee,
              progress=False, settings={**SETTINGS, "model": str(config)})
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({**TINY, "model": {**TINY["model"], "hidden": 4}}))
    with pytest.raises(ValueError, match="hyperparameters"):
        learn(initial, "emt", tmp_path / "third", finetune_from=pretrained, progress=False,
              settings={**SETTINGS, "model": str(other)})
    assert not (tmp_path / "third").exists()
    code, _, err = run_cli(capsys, "learn", initial, "--oracle", "emt", "--out-dir", tmp_path / "fourth",
                           "--model", config, "--finetune-from", pretrained, "--start-from", *first.committee)
    assert code == 2 and "exclude each other" in err.splitlines()[-1]


def candidate_pool(folder):
    """(path, frames): a file of EMT's small set (seed 5) as candidates with ids cand-0, cand-1, ..."""
    pool = folder / "pool.xyz"
    frames = generate_emt_dataset(small=True, seed=5, progress=False)
    for k, f in enumerate(frames):
        f.info["id"] = f"cand-{k}"
    ase.io.write(pool, frames)
    return pool, frames


def test_a_fixed_pool_never_labels_a_frame_twice(inputs, tmp_path):
    initial, _, _ = inputs
    pool, frames = candidate_pool(tmp_path)
    for selection in ("uncertainty", "random"):
        out = tmp_path / selection
        result = learn(initial, "emt", out, pool=pool, progress=False, log=lambda line: None,
                       settings={**SETTINGS, "model": str(inputs[2]), "label_budget": 6, "per_iteration": 3,
                                 "selection": selection})
        ids = [f.info["id"] for k in (1, 2) for f in ase.io.read(out / f"iter-{k:03d}" / "selected.xyz", ":")]
        assert len(ids) == len(set(ids)) == 6 and set(ids) <= {f"cand-{k}" for k in range(len(frames))}
        assert len(ase.io.read(out / "iter-002" / "pool.xyz", ":")) == len(frames) - 3
        assert result.labels == 6


def test_a_trust_window_leaves_out_failed_explorations_and_records_them(inputs, tmp_path, capsys):
    # DP-GEN's trust levels: frames more uncertain than trust_hi are failed explorations, never labelled
    initial, _, config = inputs
    pool, _ = candidate_pool(tmp_path)
    settings = {**SETTINGS, "model": str(config), "label_budget": 3, "per_iteration": 3}
    first = learn(initial, "emt", tmp_path / "plain", pool=pool, progress=False, log=lambda line: None,
                  settings=settings)
    # every run below starts from the same committee, so it scores the pool as this one did
    scored = ase.io.read(tmp_path / "plain" / "iter-001" / "pool.xyz", ":")
    u = {f.info["id"]: f.info["uncertainty"] for f in scored}
    plain = [f.info["id"] for f in ase.io.read(tmp_path / "plain" / "iter-001" / "selected.xyz", ":")]
    hi = float(np.median(list(u.values())))
    assert any(u[i] > hi for i in plain)  # the plain selection takes frames above the window
    members = sorted((tmp_path / "plain" / "iter-000").glob("member-*.safetensors"))
    assert len(members) == 2 and first.labels == 3
    lines = []
    learn(initial, "emt", tmp_path / "window", pool=pool, committee=members, progress=False,
          log=lines.append, settings={**settings, "trust_hi": hi})
    picked = [f.info["id"] for f in ase.io.read(tmp_path / "window" / "iter-001" / "selected.xyz", ":")]
    above = sorted(i for i, v in u.items() if v > hi)
    assert len(picked) == 3 and all(u[i] <= hi for i in picked)
    assert picked[0] == max((i for i in u if u[i] <= hi), key=u.get)  # the most uncertain one inside
    metrics = json.loads((tmp_path / "window" / "iter-001" / "metrics.json").read_text())
    assert metrics["above_trust_hi"] == len(above) > 0 and sorted(metrics["above_trust_hi_ids"]) == above
    assert metrics["in_trust_window"] == len(u) - len(above) and metrics["below_trust_lo"] == 0
    assert metrics["trust_hi"] == hi and metrics["trust_lo"] is None
    select = next(line for line in lines if line.startswith("iteration 1 select"))
    assert f"{len(above)} above (failed exploration, not labelled)" in select, select
    # nothing inside the window: the loop stops there, saying why, and labels nothing
    values = sorted(set(u.values()))
    j = len(values) // 2  # a window between two neighbouring uncertainties holds no frame
    lo, hi = values[j] + (values[j + 1] - values[j]) / 3, values[j] + 2 * (values[j + 1] - values[j]) / 3
    below = sum(v < lo for v in u.values())
    for name, window, why in (("gap", {"trust_lo": lo, "trust_hi": hi}, f"{below} below trust_lo, "
                                                                        f"{len(u) - below} above"),
                              ("low", {"trust_lo": 2 * max(values)}, f"{len(u)} below trust_lo, 0 above")):
        result = learn(initial, "emt", tmp_path / name, pool=pool, committee=members, progress=False,
                       log=lambda line: None, settings={**settings, **window})
        assert result.labels == 0 and "is in the trust window" in result.stopped and why in result.stopped
        assert not (tmp_path / name / "iter-001" / "selected.xyz").exists()
    # the window is checked, and it belongs to selection by uncertainty
    base = ["learn", initial, "--oracle", "emt", "--out-dir", tmp_path / "bad", "--model", config]
    capsys.readouterr()
    for extra, message in ((["--trust-lo", 1, "--trust-hi", 0.5], "trust_lo (1 eV/Å) must be below"),
                           (["--selection", "random", "--trust-hi", 1], "window of selection by uncertainty"),
                           (["--trust-hi", -1], "argument --trust-hi")):
        code, _, err = run_cli(capsys, *base, *extra)
        assert code == 2 and message in err.splitlines()[-1], err
    assert not (tmp_path / "bad").exists()


def test_a_folder_made_before_the_trust_window_resumes(inputs, tmp_path):
    out = tmp_path / "run"
    run(inputs, out, label_budget=0)
    record = json.loads((out / "learn.json").read_text())
    for name in ("trust_lo", "trust_hi"):  # what an older version recorded
        del record["settings"][name]
    (out / "learn.json").write_text(json.dumps(record))
    result, _ = run(inputs, out, label_budget=0, resume=True)
    assert result.stopped == "label budget of 0 spent"
    with pytest.raises(ValueError, match="settings.trust_hi = None, this run gives 1.0"):
        run(inputs, out, label_budget=0, resume=True, trust_hi=1.0)


def test_a_folder_names_its_files_relative_to_itself_and_resumes_where_it_is_moved(inputs, tmp_path):
    """learn.json holds no path of the machine that made it: its files relative to the run folder, so the
    folder, moved with them (a clone on another machine), resumes; a folder that recorded them absolutely
    (before this) still resumes in place."""
    import shutil

    initial, heldout, config = inputs
    here = tmp_path / "here"
    for name, source in (("initial.xyz", initial), ("heldout.xyz", heldout), ("tiny.yaml", config)):
        (here / "data").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, here / "data" / name)
    inputs_here = tuple(here / "data" / n for n in ("initial.xyz", "heldout.xyz", "tiny.yaml"))
    run(inputs_here, here / "run", label_budget=0)
    record = json.loads((here / "run" / "learn.json").read_text())
    assert record["initial"] == "../data/initial.xyz" and record["heldout"] == "../data/heldout.xyz"
    assert str(tmp_path) not in json.dumps(record)
    there = tmp_path / "elsewhere" / "there"
    shutil.copytree(here, there)
    inputs_there = tuple(there / "data" / n for n in ("initial.xyz", "heldout.xyz", "tiny.yaml"))
    result, lines = run(inputs_there, there / "run", label_budget=0, resume=True)
    assert result.stopped == "label budget of 0 spent" and "reused" in " ".join(lines)
    record["initial"], record["heldout"] = str(inputs_there[0]), str(inputs_there[1])  # as once recorded
    (there / "run" / "learn.json").write_text(json.dumps(record))
    assert run(inputs_there, there / "run", label_budget=0, resume=True)[0].stopped == "label budget of 0 spent"
    shutil.copyfile(inputs_there[0], there / "data" / "other.xyz")  # the same data under another name
    with pytest.raises(ValueError, match="it was made with initial = '../data/initial.xyz', this run gives "
                                         "'../data/other.xyz'"):
        run((there / "data" / "other.xyz", *inputs_there[1:]), there / "run", label_budget=0, resume=True)


def test_the_oracle_can_label_as_a_command_of_its_own(inputs, tmp_path, capsys):
    # the label stage as "LAUNCHER -m mlip data label ..." (GPAW: "mpiexec -n 2 gpaw python") gives the
    # labels the in-process oracle gives; a failing command stops the loop naming it, in one line
    import sys

    initial, _, config = inputs
    pool = tmp_path / "pool.xyz"
    frames = generate_emt_dataset(small=True, seed=5, progress=False)[:12]
    for k, f in enumerate(frames):
        f.info["id"] = f"cand-{k}"
    ase.io.write(pool, frames)
    settings = {**SETTINGS, "model": str(config), "label_budget": 3, "per_iteration": 3}
    learn(initial, "emt", tmp_path / "here", pool=pool, progress=False, log=lambda line: None, settings=settings)
    lines = []
    learn(initial, "emt", tmp_path / "there", pool=pool, progress=False, log=lines.append, settings=settings,
          oracle_launcher=[sys.executable])
    assert any(f"by emt through {sys.executable}" in line for line in lines), lines
    here = ase.io.read(tmp_path / "here" / "iter-001" / "labelled.xyz", ":")
    there = ase.io.read(tmp_path / "there" / "iter-001" / "labelled.xyz", ":")
    assert [f.info["id"] for f in here] == [f.info["id"] for f in there] and len(here) == 3
    for a, b in zip(here, there):
        assert a.info["REF_energy"] == b.info["REF_energy"]
        assert np.array_equal(a.arrays["REF_forces"], b.arrays["REF_forces"])
    capsys.readouterr()
    code, _, err = run_cli(capsys, "learn", initial, "--oracle", "emt", "--out-dir", tmp_path / "fails",
                           "--model", config, "--pool", pool, "--committee", 2, "--epochs", 1,
                           "--label-budget", 3, "--per-iteration", 3, "--oracle-launcher", "false",
                           "--no-progress")
    assert code == 1 and "iteration 1 label: the oracle's command failed (1): false -m mlip data label" in err
    assert err.count("\n") == 1
    code, _, err = run_cli(capsys, "learn", initial, "--oracle", "emt", "--out-dir", tmp_path / "fails2",
                           "--model", config, "--oracle-launcher", "'unclosed")
    assert code == 2 and "--oracle-launcher" in err and err.count("\n") == 1


def test_bad_inputs_are_refused_naming_the_problem(inputs, tmp_path, capsys):
    initial, _, config = inputs
    out = tmp_path / "run"
    base = ["learn", initial, "--out-dir", out, "--model", config]
    code, _, err = run_cli(capsys, *base, "--oracle", "nosuch")
    assert code == 2 and "unknown calculator 'nosuch'" in err
    code, _, err = run_cli(capsys, *base, "--oracle", "emt", "--explore", "md_stepz=3")
    assert code == 2 and "unknown explore setting(s) md_stepz" in err
    code, _, err = run_cli(capsys, *base, "--oracle", "emt", "--committee", 1)
    assert code == 2 and "committee must have 2 to 8 members" in err
    code, _, err = run_cli(capsys, *base, "--oracle", "emt", "--heldout", tmp_path / "missing.xyz")
    assert code == 2 and "held-out data" in err and "does not exist" in err
    assert not out.exists()  # nothing was left behind
    from mlip.run_lock import folder_lock

    with folder_lock(out):  # another run holds the folder
        code, _, err = run_cli(capsys, *base, "--oracle", "emt")
    assert code == 2 and "is in use by" in err and "choose another --out-dir" in err
    assert err.count("\n") == 1


def test_selection_prefers_uncertain_and_distinct_frames():
    a = bulk("Cu", cubic=True)
    b = bulk("Cu", "bcc", a=2.9, cubic=True).repeat((2, 1, 1))
    c = bulk("Au", cubic=True)
    frames = [a, a.copy(), b, c]
    # the second copy of a is almost as uncertain as a, but it is the same structure
    picked = select_uncertain(frames, [1.0, 0.99, 0.6, float("nan")], 2, cutoff=4.5)
    assert picked == [0, 2]
    assert select_uncertain(frames, [1.0, 0.99, 0.6, 0.1], 4, cutoff=4.5)[:2] == [0, 2]
    assert select_uncertain(frames, [np.nan] * 4, 2, cutoff=4.5) == []
    drawn = select_random(10, 4, (0, 1))
    assert drawn == select_random(10, 4, (0, 1)) and len(set(drawn)) == 4 and max(drawn) < 10
    assert select_random(3, 5, (0,)) == [0, 1, 2]


def test_the_trust_window_splits_candidates_by_uncertainty():
    u = [0.05, 0.2, 0.5, 1.0, 3.0, float("nan"), float("inf")]
    inside, below, above = trust_window(u, 0.1, 1.0)
    assert inside.tolist() == [1, 2, 3] and below.tolist() == [0] and above.tolist() == [4, 5, 6]
    inside, below, above = trust_window(u)  # no bounds: only what is not a number is out
    assert inside.tolist() == [0, 1, 2, 3, 4] and below.size == 0 and above.tolist() == [5, 6]
    assert trust_window(u, lo=0.3)[0].tolist() == [2, 3, 4]


def test_rank_correlation_is_spearmans():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(0)
    a = rng.integers(0, 6, size=40).astype(float)  # ties
    b = a + rng.normal(size=40)
    assert rank_correlation(a, b) == pytest.approx(spearmanr(a, b).statistic, abs=1e-12)
    assert rank_correlation([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert np.isnan(rank_correlation([1, 1, 1], [1, 2, 3]))
