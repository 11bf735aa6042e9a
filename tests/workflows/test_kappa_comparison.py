"""κ of named crystals by a model and a reference calculator: EMT against itself scores κ_SRME = 0, a rerun
recomputes nothing, a different model scores above 0, bad compounds are refused in one line."""

import pytest
from ase.calculators.emt import EMT
from ase.formula import Formula

pytest.importorskip("phono3py")

from mlip.workflows.phonons.kappa_comparison import (  # noqa: E402
    KAPPA_COMPOUNDS,
    compare_kappa,
    kappa_compound,
)

CU = "Cu:fcc:3.61"


class StiffEMT(EMT):
    """EMT with every energy, force and stress scaled by 1.3: other force constants, another κ."""

    def calculate(self, atoms=None, properties=("energy",), system_changes=()):
        super().calculate(atoms, properties, system_changes)
        for key in ("energy", "free_energy", "energies", "forces", "stress"):
            if key in self.results:
                self.results[key] = self.results[key] * 1.3


@pytest.mark.slow
def test_emt_against_itself_scores_zero_and_resumes(tmp_path):
    first = compare_kappa("ase.calculators.emt:EMT", EMT(), tmp_path, [CU], mesh=5, progress=False)
    row = first["compounds"]["Cu-fcc"]
    assert row["status_model"] == row["status_reference"] == "ok"
    assert row["kappa_model"] > 0 and row["kappa_model"] == pytest.approx(row["kappa_reference"], rel=1e-10)
    assert row["srme"] == pytest.approx(0.0, abs=1e-10) and first["mean_srme"] == row["srme"]
    assert first["computed"] == {"reference": 1, "model": 1} and first["n_scored"] == 1
    again = compare_kappa("ase.calculators.emt:EMT", EMT(), tmp_path, [CU], mesh=5, progress=False)
    assert again["computed"] == {"reference": 0, "model": 0} and again["compounds"] == first["compounds"]
    with pytest.raises(ValueError, match="another model"):  # the model's folder holds EMT's κ
        compare_kappa(StiffEMT(), EMT(), tmp_path, [CU], mesh=5, progress=False)


@pytest.mark.slow
def test_another_model_scores_above_zero(tmp_path):
    result = compare_kappa(StiffEMT(), EMT(), tmp_path, [CU], mesh=5, progress=False)
    row = result["compounds"]["Cu-fcc"]
    assert row["status_model"] == "ok" and 0 < row["srme"] <= 2
    assert row["kappa_model"] != pytest.approx(row["kappa_reference"], rel=1e-3)


def test_named_compounds_are_conventional_cells_with_their_settings():
    for name, (formula, _, _) in KAPPA_COMPOUNDS.items():
        material_id, atoms = kappa_compound(name, supercell=2, mesh=9)
        assert material_id == name and len(atoms) == 8 and atoms.cell.orthorhombic
        assert atoms.symbols.formula.reduce()[0].count() == Formula(formula).count()
        assert atoms.info == {"fc2_supercell": [2, 2, 2], "fc3_supercell": [2, 2, 2],
                              "q_point_mesh": [9, 9, 9]}
    assert kappa_compound(CU)[0] == "Cu-fcc"


@pytest.mark.parametrize("spec, message", [
    ("Unobtainium", "unknown compound 'Unobtainium'"),
    ("Cu:fcc", "unknown compound"),
    ("Cu:fcc:-1", "unknown compound"),
    ("Cu:nonsense:3.6", "ASE cannot build Cu as nonsense"),
])
def test_bad_compounds_are_refused_in_one_line(spec, message):
    with pytest.raises(ValueError, match=message) as info:
        kappa_compound(spec)
    assert "\n" not in str(info.value)
