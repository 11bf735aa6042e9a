"""Partially occupied sites (mlip.data.occupancy): found from what ASE's CIF reader records, refused
naming the site, or given their majority species when asked."""

from __future__ import annotations

import io
import warnings

import ase.io
import pytest
from ase.build import bulk

from mlip.data.occupancy import disordered_sites, require_ordered
from mlip.testing.structures import cubic_cif


def cif(rows: str):
    """What ASE reads from a cubic P1 CIF with the atom-site ``rows`` (its tags kept: the site labels)."""
    text = cubic_cif(rows)
    with warnings.catch_warnings():  # ASE warns that two rows share a position: that is the point here
        warnings.simplefilter("ignore", UserWarning)
        return ase.io.read(io.StringIO(text), format="cif", store_tags=True)


def test_ordered_structures_pass_unchanged():
    atoms = cif("Cu1 Cu 0 0 0 1.0\nAu1 Au 0.5 0.5 0.5 1.0\n")
    assert disordered_sites(atoms) == []
    assert require_ordered(atoms, "x.cif") is atoms
    plain = bulk("Cu")  # no occupancies recorded at all
    assert require_ordered(plain, "x") is plain


def test_a_mixed_site_is_refused_naming_it_and_how_to_order_it():
    atoms = cif("Cu1 Cu 0 0 0 0.5\nAu1 Au 0 0 0 0.5\nCu2 Cu 0.5 0.5 0 1.0\n")
    assert atoms.get_chemical_symbols()[0] == "Au"  # what ASE makes of it: one Au atom
    with pytest.raises(ValueError, match=r"^x.cif: site Cu1 \(Cu 0.5, Au 0.5 at 0, 0, 0\) is partially "
                                         r"occupied, .*order the structure first.*--majority-species"):
        require_ordered(atoms, "x.cif", labels=atoms.info["_atom_site_label"])
    with pytest.raises(ValueError, match=r"site #0 \(Cu 0.5, Au 0.5 at 0, 0, 0\) has no majority species"):
        require_ordered(atoms, "x.cif", majority_species=True)


def test_a_partly_vacant_site_is_disordered_too():
    atoms = cif("Cu1 Cu 0 0 0 0.9\nCu2 Cu 0.5 0.5 0 1.0\nAu1 Au 0.5 0 0.5 0.3\n")
    sites = disordered_sites(atoms, atoms.info["_atom_site_label"])
    assert [s.label for s in sites] == ["Cu1", "Au1"]
    message = r"site Cu1 \(Cu 0.9, vacant 0.1 at .* \(and 1 more disordered site\),"
    with pytest.raises(ValueError, match=message):
        require_ordered(atoms, "x.cif", labels=atoms.info["_atom_site_label"], option=None)
    # mostly vacant: no species to put there (dropping the atom would change the composition silently)
    with pytest.raises(ValueError, match=r"site #2 \(Au 0.3, vacant 0.7 .*has no majority species"):
        require_ordered(atoms, "x.cif", majority_species=True)


def test_majority_species_orders_every_site_and_forgets_the_occupancies():
    atoms = cif("Cu1 Cu 0 0 0 0.25\nAu1 Au 0 0 0 0.75\nCu2 Cu 0.5 0.5 0 0.6\nNi2 Ni 0.5 0.5 0 0.4\n")
    ordered = require_ordered(atoms, "x.cif", majority_species=True)
    assert ordered.get_chemical_symbols() == ["Au", "Cu"]
    assert "occupancy" not in ordered.info and "occupancy" in atoms.info  # the input is left as it was
    assert disordered_sites(ordered) == []


@pytest.mark.parametrize("occupancies", [{"Cu": 0.7, "Au": 0.6}, {"Cu": -0.5}, {"Cu": "half"}])
def test_impossible_occupancies_are_refused(occupancies):
    atoms = bulk("Cu")
    atoms.info["occupancy"] = {"0": occupancies}
    with pytest.raises(ValueError, match="site #0: occupancies"):
        disordered_sites(atoms)


def test_batch_readers_refuse_a_partially_occupied_site(tmp_path):
    from mlip.workflows.discovery.inputs import read_structures
    from mlip.workflows.phonons.kappa_batch import read_kappa_structures

    path = tmp_path / "cuau.cif"
    atoms = cif("Cu1 Cu 0 0 0 0.25\nAu1 Au 0 0 0 0.75\nCu2 Cu 0.5 0.5 0 1.0\n")
    ase.io.write(path, atoms)  # ASE writes the occupancies back
    with pytest.raises(ValueError, match=r"cuau.cif.*frame 0.*partially occupied"):
        read_structures(path)
    with pytest.raises(ValueError, match=r"cuau.cif, frame 0: site .* partially occupied"):
        read_kappa_structures(path, require_settings=False)


def test_labelling_refuses_a_partially_occupied_site(tmp_path, capsys):
    from mlip.testing.cli import run_cli
    from mlip.testing.structures import disordered_cuau_cif

    path = tmp_path / "cuau.cif"
    path.write_text(disordered_cuau_cif(cu=0.25, au=0.75))
    code, _, err = run_cli(capsys, "data", "label", path, "--calculator", "emt", "--out-dir",
                           tmp_path / "run", "-o", tmp_path / "l.xyz")
    assert code == 2, err
    assert "cuau.cif, frame 0: site Cu1 (Cu 0.25, Au 0.75 at 0, 0, 0) is partially occupied" in err
    assert not (tmp_path / "l.xyz").exists() and not (tmp_path / "run").exists()
