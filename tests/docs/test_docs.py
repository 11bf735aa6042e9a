"""The documentation agrees with what the repository ships and measures.

The README is a user manual: it keeps the two commands at its top (the first one true, the test command
after its marker as ``.ci/run`` extracts it) and a shipped-models table whose rows are the model cards'
(``models/pretrained/NAME.json``, written by ``mlip card``). Every Markdown link of the README,
``docs/``, ``examples/`` and the cards resolves to a file, and ``examples/README.md`` names every example.
Each card's training commands are its recipe in ``examples/recipes/NAME/``, stage for stage. The result
tables of ``docs/`` quote their recorded runs in ``benchmarks/results/``: the shipped models and the
ablations (every variant ``benchmarks/accuracy/ablations.py`` defines) and MACE in ``docs/benchmarks.md``, the
one-hour EquiformerV3 runs (whose last recipe the example files must be) in ``docs/training-recipes.md``.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from mlip.models.legacy import upgrade_checkpoint
from mlip.pretrained import EMT_ELEMENTS
from mlip.terms import term_specs

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
BENCHMARKS_DOC = DOCS / "benchmarks.md"
RECIPES_DOC = DOCS / "training-recipes.md"
EXAMPLES = ROOT / "examples"
CARDS = sorted((ROOT / "models" / "pretrained").glob("*.json"))

pytestmark = pytest.mark.skipif(not README.is_file(), reason="README.md is not beside the tests (installed tests)")


def _row(text: str, first_cell: str) -> list:
    """Cells of the Markdown table row whose first cell starts with ``first_cell``."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].startswith(first_cell):
            return cells
    raise AssertionError(f"no table row starting with {first_cell!r}")


def _close(shown: str, exact: float) -> bool:
    """``shown`` is ``exact`` rounded to the digits it shows (half a unit of its last digit)."""
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    return abs(float(shown) - exact) <= 0.5 * 10.0 ** -decimals + 1e-9


def _code_block_after(text: str, marker: str) -> str:
    """The first line of the first fenced code block after ``marker`` (what ``.ci/run`` runs)."""
    lines = text[text.index(marker) + len(marker):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("```"))
    return lines[start + 1]


# ------------------------------------------------------------------------------------------ README


def test_readme_is_a_manual_of_at_most_250_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_readme_starts_with_the_two_commands():
    """The first code block installs the package and runs MD with the shipped default model on a structure
    the repository holds; the test command follows its marker, as ``.ci/run`` extracts it."""
    text = README.read_text(encoding="utf-8")
    first = _code_block_after(text, "\n")
    assert first.startswith("pip install torch==") and " . && mlip md " in first, first
    structure = first.split("mlip md ")[1].split()[0]
    assert (ROOT / structure).is_file(), structure
    assert "--model default" in first
    assert text.index(first) < text.index("<!-- test-command -->")
    test = _code_block_after(text, "<!-- test-command -->")
    assert test.startswith("pip install torch==") and '-e ".[test]"' in test, test
    # the whole suite, on one process or several (a module's expensive fixture on one: tests/conftest.py)
    assert re.search(r"&& pytest( -n \d+ --dist loadgroup)?$", test), test
    constraints = re.search(r" -c (\S+)", test)  # the pinned test environment (README, "Tests")
    assert constraints and (ROOT / constraints.group(1)).is_file(), test
    ci = (ROOT / ".ci" / "run")
    if ci.is_file():
        assert "<!-- test-command -->" in ci.read_text()


def test_readme_install_names_every_extra():
    """The install section names every optional extra of pyproject.toml (the test extra has its command)."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    text = README.read_text(encoding="utf-8")
    for extra in extras:
        assert f"[{extra}]" in text, extra


_NUMBERS = {word: n for n, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}


def test_readme_counts_the_shipped_models():
    """The README's "ships N models" and its table of shipped models are the registry's trained models."""
    from mlip import pretrained

    text = README.read_text(encoding="utf-8")
    count = re.search(r"ships (\w+) models", text)
    assert count and _NUMBERS.get(count.group(1)) == len(pretrained.TRAINED), count and count.group(0)
    section = text[text.index("## Shipped models"):]
    section = section[:section.index("\n## ")]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    table = {line.strip("|").split("|")[0].split()[0].strip("`") for line in rows}
    assert table == set(pretrained.TRAINED)


def test_readme_documents_the_threads_option():
    from mlip.cli import build_parser

    text = README.read_text(encoding="utf-8")
    assert "`--threads N`" in text and "`--threads 1`" in text
    md = next(a for a in build_parser()._subparsers._group_actions[0].choices["md"]._actions
              if "--threads" in a.option_strings)
    assert md.default is None  # chosen at run time by mlip.threads, as the README says
    assert "`mlip.threads`" in text


def test_the_recipes_readme_lists_every_shipped_model_and_its_stages():
    """examples/recipes/README.md's table holds one row per shipped model, with its folder's stage count."""
    from mlip import pretrained

    text = (EXAMPLES / "recipes" / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| \[`([\w.-]+)/`\]\([^)]*\) \| (\d+) \|", text, flags=re.M)
    assert {name for name, _ in rows} == set(pretrained.TRAINED)
    for name, stages in rows:
        assert int(stages) == len(list((EXAMPLES / "recipes" / name).glob("stage*.yaml"))), name


def test_no_readme_calls_a_shipped_model_unshipped():
    """Where examples/README.md or a recipe's README says "not shipped" (or "will ship"), no shipped model is
    named in that sentence (but as "(shipped" itself)."""
    from mlip import pretrained

    for path in [EXAMPLES / "README.md", *(EXAMPLES / "recipes").rglob("README.md")]:
        paragraphs = re.split(r"\n\s*\n|\n(?=#)", path.read_text(encoding="utf-8"))  # a heading stands alone
        sentences = [s for p in paragraphs for s in re.split(r"(?<=[.;:])\s", " ".join(p.split()))]
        for sentence in sentences:
            if not re.search(r"not shipped|will ship|shipped yet", sentence):
                continue
            named = {name for name in pretrained.TRAINED
                     if re.search(rf"`(?:recipes/)?{re.escape(name)}/?`(?! \(shipped)", sentence)}
            assert not named, f"{path.relative_to(ROOT)}: {sorted(named)} called unshipped: {sentence!r}"


def test_training_doc_gives_the_default_size_of_the_emt_set():
    from mlip.data.emt import DEFAULT_COUNTS

    text = (DOCS / "training.md").read_text(encoding="utf-8")
    size = re.search(r"mlip data emt emt\.xyz --seed 0 +# ([\d,]+) EMT-labelled structures", text)
    assert size and int(size.group(1).replace(",", "")) == sum(DEFAULT_COUNTS.values())


def _markdown_files() -> list:
    files = [README, ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "README.md"]
    files += sorted(DOCS.rglob("*.md")) + sorted(EXAMPLES.rglob("*.md"))
    files += sorted((ROOT / "models" / "pretrained").glob("*.md"))
    return [f for f in files if f.is_file()]


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(path):
    """Every relative Markdown link ``[text](target)`` names an existing file or folder."""
    text = path.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    for target in links:
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        resolved = (path.parent / target.split("#")[0]).resolve()
        assert resolved.exists(), f"{path.relative_to(ROOT)}: link to {target} does not resolve"


def _linked_pages(path: Path) -> list:
    """The pages of docs/ that ``path`` links to, in order, relative to docs/ (each once)."""
    pages = []
    for target in re.findall(r"\]\(([^)\s#]+\.md)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
        resolved = (path.parent / target).resolve()
        if resolved.is_relative_to(DOCS) and resolved.relative_to(DOCS).as_posix() not in pages:
            pages.append(resolved.relative_to(DOCS).as_posix())
    return pages


def test_docs_index_lists_every_page_in_the_order_of_the_site():
    """``docs/index.md`` links every page of docs/ (the API reference through its own index, which links
    each of its pages), and mkdocs.yml's navigation is the same pages in the same order."""
    import yaml

    listed = _linked_pages(DOCS / "index.md")
    assert set(listed) >= {p.name for p in DOCS.glob("*.md")} - {"index.md"}, "docs/index.md misses a page"
    api = _linked_pages(DOCS / "api" / "index.md")
    assert set(api) == {f"api/{p.name}" for p in (DOCS / "api").glob("*.md")} - {"api/index.md"}, (
        "docs/api/index.md misses a page")

    def flatten(nav):
        for item in nav:
            if isinstance(item, dict):
                for value in item.values():
                    yield from flatten(value) if isinstance(value, list) else [value]
            else:
                yield item

    nav = list(flatten(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]))
    reading = ["index.md"] + [p for p in listed if not p.startswith("api/")] + ["api/index.md"] + api
    assert nav == reading


def test_examples_readme_is_true():
    """Every example file is named in ``examples/README.md`` (a recipe's stages in its folder's README), and
    every file those READMEs name in backticks exists."""
    top = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    for path in EXAMPLES.iterdir():
        if path.name in ("README.md", "__pycache__") or path.name.startswith("."):
            continue
        assert f"`{path.name}" in top or f"`{path.name}/" in top, f"examples/README.md does not name {path.name}"
    for path in (EXAMPLES / "structures").iterdir():
        assert f"structures/{path.name}" in top, path.name
    recipes = EXAMPLES / "recipes"
    for folder in sorted(p for p in recipes.iterdir() if p.is_dir()):
        assert f"recipes/{folder.name}/" in top, folder.name
        readme = (folder / "README.md").read_text(encoding="utf-8")
        for stage in folder.glob("*.yaml"):
            assert f"examples/recipes/{folder.name}/{stage.name}" in readme, (folder.name, stage.name)
    for readme in [EXAMPLES / "README.md", *recipes.rglob("README.md")]:
        for name in re.findall(r"`([\w./-]+\.(?:py|yaml|cif|md))`", readme.read_text(encoding="utf-8")):
            candidates = [readme.parent / name, EXAMPLES / name, ROOT / name]
            assert any(c.exists() for c in candidates), f"{readme.relative_to(ROOT)} names {name}, which is missing"


# ------------------------------------------------------------------------------------- model cards


def test_every_shipped_model_has_a_card():
    assert {p.stem for p in CARDS} >= {"equiformer_v3-emt", "platonic-emt", "embedded-atom-emt"}


@pytest.mark.parametrize("card_path", CARDS, ids=[p.stem for p in CARDS])
def test_readme_models_table_row_is_the_card(card_path):
    """The README's row for each shipped model: its elements and test force MAE are the card's, and it links
    to the card's Markdown."""
    card = json.loads(card_path.read_text())
    cells = _row(README.read_text(encoding="utf-8"), f"`{card['name']}`")
    species = card["training_config"]["model"]["species"]
    many = re.fullmatch(r"(\d+) elements, (\w+)–(\w+)", cells[2])  # a long list named by its count and ends
    if many:
        assert [int(many.group(1)), many.group(2), many.group(3)] == [len(species), species[0], species[-1]], cells[2]
    else:
        assert cells[2].split() == species, (card["name"], cells[2])
    force = re.fullmatch(r"(\d+(?:\.\d+)?) meV/Å", cells[3])
    assert force and _close(force.group(1), card["test"]["metrics"]["forces_mae_meV_per_A"]), cells[3]
    assert f"(models/pretrained/{card['name']}.md)" in cells[4], cells[4]


def _drop_later_defaults(config: dict, recorded: dict) -> None:
    """Remove from ``config`` (a TrainConfig mapping) the keys, top-level or of ``optimizer``, that a config
    ``recorded`` before they existed lacks (the wsd schedule, the plateau rule), checking they hold today's
    defaults: the recorded run had those settings."""
    from mlip.training import TrainConfig

    defaults = TrainConfig().to_dict()
    sections = ((config.get("optimizer", {}), recorded.get("optimizer", {}), defaults["optimizer"]),
                (config, recorded, defaults))
    for mine, theirs, default in sections:
        for key in [k for k in mine if k not in theirs]:
            assert mine.pop(key) == default[key], key


@pytest.mark.parametrize("card_path", CARDS, ids=[p.stem for p in CARDS])
def test_card_training_commands_are_its_recipe(card_path):
    """A card's ``train_command`` (and the command block of its Markdown) runs exactly the stages of
    ``examples/recipes/NAME/``, in order; each stage's loss weights, learning rate and architecture are the
    card's record of that stage, and the last stage's config is the card's ``training_config`` (paths aside)."""
    from mlip.training import TrainConfig

    card = json.loads(card_path.read_text())
    name = card["name"]
    # each stage by `mlip train`, or in a fixed wall-clock time by `examples/recipes/train_on_budget.py`
    command = r"(?:mlip train|train_on_budget\.py) (\S+\.yaml)"
    named = re.findall(command, card["train_command"])
    assert named, f"{name}'s card names no training config"
    # the recipe's folder: examples/recipes/NAME/, or a later version of it (v2/: one fine-tuning config)
    folder = (ROOT / named[0]).parent
    assert folder in (EXAMPLES / "recipes" / name, EXAMPLES / "recipes" / name / "v2"), (name, named)
    stages = sorted(folder.glob("stage*.yaml"), key=lambda p: int(p.stem[5:])) or [ROOT / n for n in named]
    assert all(p.is_file() for p in stages), (name, named)
    assert named == [str(p.relative_to(ROOT)) for p in stages], (name, named)
    markdown = card_path.with_suffix(".md").read_text(encoding="utf-8")
    assert re.findall(command, markdown) == named, name
    configs = [TrainConfig.from_yaml(p) for p in stages]
    assert len(card["training"]["stages"]) == len(configs), name
    for recorded, config in zip(card["training"]["stages"], configs):
        loss = config.loss
        assert recorded["loss"] == [loss.energy_weight, loss.forces_weight, loss.stress_weight], (name, recorded)
        assert recorded["lr"] == config.optimizer.lr and recorded["model"] == config.model["name"], (name, recorded)
    last, shipped = configs[-1].to_dict(), dict(card["training_config"])
    for key in ("data", "out_dir", "init_from", "init_embedded_atom_from", "max_minutes"):
        last.pop(key, None), shipped.pop(key, None)
    if "train_on_budget.py" in card["train_command"]:  # its calibration sets the epochs that fit the minutes
        assert shipped.pop("epochs") == card["training"]["epochs"], name
        last.pop("epochs")
    _drop_later_defaults(last, shipped)
    ours, theirs = dict(last.pop("model")), dict(shipped.pop("model"))
    assert ours.pop("repulsion", "zbl") == theirs.pop("repulsion", "zbl")  # zbl: create_model's default
    # a card trained before terms were declared records the term as the legacy hyperparameter
    theirs, terms, _ = upgrade_checkpoint(theirs, theirs.pop("terms", None), {})
    if terms:
        theirs["terms"] = terms
    if "terms" in ours:
        ours["terms"] = term_specs(ours["terms"])
        theirs["terms"] = term_specs(theirs["terms"])
    assert ours == theirs and last == shipped, name


def test_paths_named_in_cards_and_results_exist():
    """Every repository path (``examples/…``, ``benchmarks/…``) a card or a recorded result names exists."""
    records = CARDS + sorted((ROOT / "benchmarks" / "results").glob("*.json"))
    for record in records:
        json.loads(record.read_text())  # each record is valid JSON
        for path in re.findall(r"(?:examples|benchmarks)/[\w./*-]+\.(?:yaml|py|json|sh|cif)", record.read_text()):
            assert list(ROOT.glob(path)), f"{record.relative_to(ROOT)} names {path}, which is missing"


def test_no_card_or_record_holds_a_path_of_the_machine_that_made_it():
    """Cards, recorded results and committed run folders name files relative to the repository (or to
    the run's folder), never by an absolute path of the machine that made them."""
    absolute = re.compile(r"(?<![\w./-])/(?:work|tmp|home|root|Users|mnt|scratch)/[^\s\"']*")
    records = CARDS + sorted((ROOT / "benchmarks" / "results").glob("*.json")) + sorted(
        (ROOT / "examples" / "recipes").glob("**/*-run/*.json")) + sorted(
        (ROOT / "examples").glob("**/learn.json")) + sorted(
        (ROOT / "examples" / "datasets").glob("*/dft-validation/*.json")) + sorted(
        (ROOT / "examples" / "datasets").glob("*/v2/learn/gain/*.json"))
    for record in records:
        found = absolute.findall(record.read_text(encoding="utf-8"))
        assert not found, f"{record.relative_to(ROOT)} names {found[0]}"


@pytest.mark.parametrize("card_path", CARDS, ids=[p.stem for p in CARDS])
def test_benchmarks_shipped_models_table_matches_the_model_card(card_path):
    """``docs/benchmarks.md``'s table of the shipped models quotes the card's parameters and test MAEs."""
    card = json.loads(card_path.read_text())
    cells = _row(BENCHMARKS_DOC.read_text(encoding="utf-8"), f"`{card['name']}`")
    assert int(cells[2].replace(",", "")) == card["n_parameters"]
    numbers = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?) meV/", cells[3])]
    assert len(numbers) == 3, cells[3]
    metrics = card["test"]["metrics"]
    expected = [metrics["energy_mae_meV_per_atom"], metrics["forces_mae_meV_per_A"],
                metrics["stress_mae_meV_per_A3"]]
    # The table rounds to one decimal (stress below 1 meV/Å³ to two): within half a unit of the last digit.
    for shown, measured in zip(numbers, expected):
        assert abs(shown - measured) <= 0.05 + 1e-9, (card["name"], numbers, expected)


#: each recorded ablation run → the docs/benchmarks.md section whose table quotes it
ABLATION_RUNS = {ROOT / "benchmarks" / "results" / "ablations-60min-2026-12-01.json": "## Ablations\n",
                 ROOT / "benchmarks" / "results" / "ablations-sige-20min-2026-12-05.json":
                     "## Ablations on Si–Ge PBE\n"}


def _section(text: str, heading: str) -> str:
    """The text from ``heading`` (a line of its own) to the next heading of the same level."""
    assert heading in text, f"docs/benchmarks.md has no section {heading.strip()!r}"
    rest = text.split(heading, 1)[1]
    level = heading.split()[0] + " "
    return rest.split("\n" + level, 1)[0]


@pytest.mark.parametrize("record", list(ABLATION_RUNS), ids=[p.stem for p in ABLATION_RUNS])
def test_ablation_table_matches_the_recorded_runs(record):
    """Every variant of a recorded ablation run (``benchmarks/results/ablations-*.json``: the variants'
    result.json and validation history) is still defined by ``benchmarks/accuracy/ablations.py`` and has a row
    in its section of ``docs/benchmarks.md`` that quotes it: parameters, epochs, minutes, minutes per epoch
    and the test MAEs, to the table's rounding; so does MACE's row where the run has one. (The EMT run
    predates the embedded-atom variants; the Si–Ge run has them all.)"""
    script = ROOT / "benchmarks" / "accuracy" / "ablations.py"
    spec = importlib.util.spec_from_file_location("ablations", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    recorded = json.loads(record.read_text())
    runs = recorded["variants"]
    text = _section(BENCHMARKS_DOC.read_text(encoding="utf-8"), ABLATION_RUNS[record])
    assert set(runs) <= set(module.VARIANTS) and len(runs) >= 6
    if "sige" in record.stem:
        assert set(runs) == set(module.VARIANTS) and recorded.get("mace"), "the Si–Ge run has every variant"
    rows = list(runs.items())
    if recorded.get("mace"):
        mace = recorded["mace"]
        minutes = mace["training"]["train_loop_s"] / 60
        rows.append(("MACE", {"n_parameters": mace["n_parameters"], "minutes": minutes,
                              "epochs_run": mace["training"]["epochs_equivalent"], "test": mace["test"]}))
    for name, run in rows:
        cells = _row(text, name)
        assert int(cells[2].replace(",", "")) == run["n_parameters"], (name, cells)
        per_epoch = float(cells[3].split()[0])
        assert _close(cells[4], run["epochs_run"]), (name, cells)
        assert abs(float(cells[5]) - run["minutes"]) <= 0.05 + 1e-9, (name, cells)
        assert abs(per_epoch - run["minutes"] / run["epochs_run"]) <= 0.005 + 1e-9, (name, cells)
        shown = [float(c) for c in cells[-3:]]  # energy, force and stress MAE
        measured = [run["test"][k] for k in module.KEYS]
        for value, exact, half in zip(shown, measured, (0.05, 0.05, 0.005)):
            assert abs(value - exact) <= half + 1e-9, (name, shown, measured)


@pytest.mark.parametrize("card_path", CARDS, ids=[p.stem for p in CARDS])
def test_discovery_scores_match_the_model_card(card_path):
    """``docs/benchmarks.md``'s summary of the miniature Matbench Discovery ("`NAME` scores F1 …, hull-distance
    MAE … meV/atom") quotes the card's F1 to three decimals and its MAE to 0.1 meV/atom."""
    card = json.loads(card_path.read_text())
    text = " ".join(BENCHMARKS_DOC.read_text(encoding="utf-8").split())
    if "mini_discovery" not in card:
        # only a model of other elements than the miniature benchmark's may lack it (the Si–Ge models)
        species = set(card["training_config"]["model"]["species"])
        assert not species >= set(EMT_ELEMENTS), f"the card of {card['name']} lacks the miniature discovery"
        assert f"`{card['name']}` scores F1" not in text
        return
    found = re.search(rf"`{re.escape(card['name'])}` (?:scores )?F1 (\d\.\d+), (?:hull-distance )?MAE "
                      r"(\d+(?:\.\d+)?) meV/atom", text)
    assert found, f"docs/benchmarks.md does not give {card['name']}'s miniature-discovery F1 and MAE"
    metrics = card["mini_discovery"]["metrics"]
    assert abs(float(found.group(1)) - metrics["F1"]) <= 0.0005 + 1e-9, (found.group(0), metrics["F1"])
    assert abs(float(found.group(2)) - 1000 * metrics["MAE"]) <= 0.05 + 1e-9, (found.group(0), metrics["MAE"])


MACE_RUN = ROOT / "benchmarks" / "results" / "mace-baseline-2026-12-02-e0s-stage-two.json"
#: the one-stage MACE, evaluated and timed in a run of its own
MACE_ONE_STAGE_RUN = ROOT / "benchmarks" / "results" / "mace-baseline-2026-12-02-e0s.json"
#: the MACE table's row (docs/benchmarks.md) → (recorded run, that model's entry ("model") in it)
MACE_ROWS = {
    "MACE, Stage Two from epoch 4": (MACE_RUN, "MACE"),
    "MACE, one stage": (MACE_ONE_STAGE_RUN, "MACE"),
    "Platonic, stage-1 settings": (MACE_RUN, "ablations60-compat/platonic-T-softmax.safetensors"),
    "EquiformerV3, stage-1 settings": (MACE_RUN, "ablations60-compat/eqv3-swiglu-merged.safetensors"),
    "EquiformerV3, gate activation": (MACE_RUN, "ablations60-compat/eqv3-gate-merged.safetensors"),
    "`platonic-emt` before its repulsive-core stages": (MACE_RUN, "platonic-emt"),
    "the 9-stage `equiformer_v3-emt` (shipped until 2026-12-03)": (MACE_RUN, "equiformer_v3-emt"),
    "`embedded-atom-emt` (shipped)": (MACE_RUN, "embedded-atom-emt"),
}


def test_mace_table_matches_the_recorded_run():
    """The "Against MACE" table of ``docs/benchmarks.md`` quotes ``benchmarks/accuracy/mace_baseline.py``'s
    recorded run: parameters, the three test MAEs, ms per MD step at 256 and 500 atoms, and the range of
    the two costs vs MACE (the two-stage MACE's, timed in the same run as our models)."""
    records = {path: json.loads(path.read_text()) for path in {path for path, _ in MACE_ROWS.values()}}
    for path, record in records.items():  # both MACE runs took E0 from the training set's isolated atoms, and say so
        assert record["mace_e0s"].startswith("{13: 3.28,"), path
    runs = {path: {m["model"]: m for m in record["models"]} for path, record in records.items()}
    text = BENCHMARKS_DOC.read_text(encoding="utf-8")
    table = text[text.index("**Against MACE**"):]
    table = table[table.index("\n|"):table.index("\n\n", table.index("\n|"))]
    assert len([line for line in table.splitlines() if line.startswith("|")]) == len(MACE_ROWS) + 2
    for label, (path, key) in MACE_ROWS.items():
        cells = _row(table, label)
        model = runs[path][key]
        assert int(cells[2].replace(",", "")) == model["n_parameters"], (label, cells)
        errors = re.findall(r"(\d+(?:\.\d+)?) meV/", cells[3])
        measured = [model["test"][k] for k in ("energy_mae_meV_per_atom", "forces_mae_meV_per_A",
                                               "stress_mae_meV_per_A3")]
        assert len(errors) == 3 and all(map(_close, errors, measured)), (label, errors, measured)
        steps = [s.strip() for s in cells[4].split("/")]
        timed = [model["md"][n]["ms_per_step"] for n in ("256", "500")]
        assert len(steps) == 2 and all(map(_close, steps, timed)), (label, steps, timed)
        if key == "MACE":
            assert cells[5] == "1"
        else:
            low, high = cells[5].split("–")
            costs = sorted(model[f"cost_vs_mace_{n}"] for n in (256, 500))
            assert _close(low, costs[0]) and _close(high, costs[1]), (label, cells[5], costs)


HOUR_RUN = ROOT / "benchmarks" / "results" / "equiformer-v3-hour-2026-12-02.json"
#: the one-hour table's row (docs/training-recipes.md) → that run's entry ("name") in the record; the last is the example files
#: (the shipped equiformer_v3-emt)
HOUR_ROWS = {
    "gate, energy weight 5, 11 + 3 epochs": "gate, energy weight 5, 11 + 3 epochs",
    "gate, energy weight 5, 11 + 6 epochs": "gate, energy weight 5, 11 + 6 epochs",
    "gate, energy weight 20, 11 + 6 epochs": "gate, energy weight 20, 11 + 6 epochs",
    "the same with logarithmic densities to 6 Å, attention 5 Å":
        "gate, energy weight 20, 11 + 6 epochs, log densities to 6 Å, attention 5 Å",
    "the same, 11 + 10 epochs":
        "gate, energy weight 20, 11 + 10 epochs, log densities to 6 Å, attention 5 Å",
    "**the same, batches of 4 (the shipped model)**":
        "gate, energy weight 20, 11 + 10 epochs, log densities to 6 Å, attention 5 Å, batch 4",
}


def test_one_hour_equiformer_table_matches_the_recorded_runs():
    """The one-hour EquiformerV3 table of ``docs/training-recipes.md`` quotes the recorded gate runs (minutes per stage and in all,
    test MAEs), and the example files are the recorded recipe of its last row, paths and time limits aside,
    which is the shipped ``equiformer_v3-emt`` (its model card).
    (Its first row, SwiGLU-S² of 2026-11-30, predates the record.)"""
    from mlip.training import TrainConfig

    runs = {r["name"]: r for r in json.loads(HOUR_RUN.read_text())["runs"]}
    text = RECIPES_DOC.read_text(encoding="utf-8")
    table = text[text.index("| one-hour recipe |"):]
    table = table[:table.index("\n\n")]
    assert len([line for line in table.splitlines() if line.startswith("|")]) == len(HOUR_ROWS) + 3  # + SwiGLU row
    for label, name in HOUR_ROWS.items():
        cells, run = _row(table, label), runs[name]
        parts, total = cells[1].split("=")
        parts = [s.strip() for s in parts.split("+")]
        minutes = [s["minutes"] for s in run["stages"]]
        assert len(parts) == len(minutes) and all(map(_close, parts, minutes)), (label, cells, minutes)
        assert _close(total.strip(), run["minutes"]), (label, cells, run["minutes"])
        shown = [s.strip().strip("*") for s in cells[2].split("/")]
        measured = [run["test"][k] for k in ("energy_mae_meV_per_atom", "forces_mae_meV_per_A",
                                             "stress_mae_meV_per_A3")]
        assert len(shown) == 3 and all(map(_close, shown, measured)), (label, cells, measured)
    recipe = runs[list(HOUR_ROWS.values())[-1]]["stages"]
    examples = [ROOT / "examples" / "recipes" / "equiformer_v3-emt" / f"stage{s}.yaml" for s in (1, 2)]
    assert len(recipe) == len(examples)
    for path, stage in zip(examples, recipe):
        ours, recorded = TrainConfig.from_yaml(path).to_dict(), stage["config"]
        _drop_later_defaults(ours, recorded)
        for key in ("model", "loss", "optimizer", "epochs", "batch_size", "seed", "dtype", "reference_energies",
                    "augment_rotations"):
            assert ours[key] == recorded[key], (path.name, key, ours[key], recorded[key])
    # ... and the shipped equiformer_v3-emt is that run: its card's last-stage config and test errors are the record's
    card = json.loads((ROOT / "models" / "pretrained" / "equiformer_v3-emt.json").read_text())
    last = runs[list(HOUR_ROWS.values())[-1]]
    recorded = json.loads(json.dumps(recipe[-1]["config"]))
    recorded["data"]["train"] = Path(recorded["data"]["train"]).name  # a card names its data, not where it lay
    assert card["training_config"] == recorded
    for key in ("energy_mae_meV_per_atom", "forces_mae_meV_per_A", "stress_mae_meV_per_A3"):
        assert abs(card["test"]["metrics"][key] - last["test"][key]) <= 1e-6 * max(1.0, abs(last["test"][key])), key
