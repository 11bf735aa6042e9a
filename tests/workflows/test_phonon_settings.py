"""The settings objects of the phonon and κ workflows, and the command line that builds them.

The workflows themselves (and the same errors through their keyword arguments) are tested in
test_phonons.py and test_kappa.py; nothing here needs phonopy.
"""

from __future__ import annotations

import dataclasses

import pytest
from ase.build import bulk

from mlip.cli import build_parser
from mlip.cli import kappa as kappa_cli
from mlip.cli import phonons as phonons_cli
from mlip.workflows.phonons import KappaSettings, PhononSettings, run_kappa, run_phonons

EMT = "ase.calculators.emt:EMT"


@pytest.mark.parametrize("kwargs, message", [
    ({"displacement": 0.0}, "displacement must be a positive distance up to 0.5 Å, got 0.0"),
    ({"displacement": 0.6}, "displacement must be a positive distance up to 0.5 Å, got 0.6"),
    ({"displacement": "0.01"}, "displacement must be a positive distance"),
    ({"symprec": 0.0}, "symprec and fix_symmetry_symprec must be positive, got 0.0, 0.01"),
    ({"fmax": 0.0}, "fmax must be positive"),
    ({"relax_steps": -1}, "relax_steps must be >= 0, got -1"),
    ({"supercell": 0}, "singular"),
    ({"supercell": [[0, 1, 0], [1, 0, 0], [0, 0, 1]]}, "supercell matrix .* is left-handed"),
    ({"mesh": (4, 4)}, "mesh must be a length in Å"),
    ({"mesh": -5.0}, "a mesh length must be positive"),
    ({"temperatures": (500, 100, 10)}, "0 <= t_min <= t_max"),
    ({"temperatures": 300}, r"temperatures must be \(t_min, t_max, t_step\)"),
    ({"band_npoints": 2.5}, "band_npoints must be an integer >= 2"),
    ({"min_width": 0.0}, "min_width must be a positive length"),
    ({"imaginary_tol": -0.1}, "imaginary_tol must be >= 0"),
])
def test_a_bad_phonon_setting_is_refused_when_made(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PhononSettings(**kwargs)


@pytest.mark.parametrize("kwargs, message", [
    ({"displacement": -0.03}, "displacement must be a positive distance"),
    ({"method": "bte"}, r"method must be one of \('wigner', 'rta', 'lbte'\), got 'bte'"),
    ({"temperatures": []}, "temperatures must be one or more non-negative values in K"),
    ({"temperatures": [-1.0]}, "temperatures must be one or more non-negative values in K"),
    ({"boundary_mfp": 0.0}, "boundary_mfp must be a positive length in µm or None"),
    ({"mesh": [11, 11]}, r"mesh must be n or \(n1, n2, n3\) positive integers, got \[11, 11\]"),
    ({"fc3_supercell": [[2, 0, 0], [0, 2, 0], [0, 0, -2]]}, "fc3_supercell matrix .* is left-handed"),
    ({"fc2_supercell": "abc"}, "fc2_supercell"),
    ({"relax": True, "fmax": -1.0}, "fmax must be positive"),
])
def test_a_bad_kappa_setting_is_refused_when_made(kwargs, message):
    with pytest.raises(ValueError, match=message):
        KappaSettings(**kwargs)


def test_the_defaults_are_the_protocols():
    phonons, kappa = PhononSettings(), KappaSettings()
    assert (phonons.displacement, kappa.displacement) == (0.01, 0.03)  # phonopy's; Matbench Discovery's
    for s in (phonons, kappa):
        assert (s.relax, s.fmax, s.relax_steps, s.symprec, s.fix_symmetry_symprec, s.subtract_residual_forces) \
            == (True, 1e-4, 300, 1e-5, 0.01, True)
    assert (phonons.supercell, phonons.min_width, phonons.no_shear, phonons.mesh, phonons.temperatures,
            phonons.band_npoints, phonons.imaginary_tol) == (None, 12.0, False, 100.0, (0.0, 1000.0, 10.0), 51, 0.05)
    assert (kappa.fc2_supercell, kappa.fc3_supercell, kappa.mesh, kappa.temperatures, kappa.method, kappa.isotopes,
            kappa.boundary_mfp, kappa.stop_on_broken_symmetry, kappa.check_supercells) \
        == (None, None, None, (300.0,), "wigner", True, 1e6, True, True)
    # without relaxation its settings are not checked, as before
    assert not PhononSettings(relax=False, fmax=0.0).relax


def test_settings_are_kept_in_one_form_and_frozen():
    assert PhononSettings(mesh=12, temperatures=[0, 500, 5]) == PhononSettings(mesh=(12, 12, 12),
                                                                               temperatures=(0.0, 500.0, 5.0))
    assert PhononSettings(mesh=40.0).mesh == 40.0  # a length density stays a length
    assert PhononSettings(supercell=[[2, 0, 0], [0, 2, 0], [0, 0, 2]]).supercell == ((2, 0, 0), (0, 2, 0), (0, 0, 2))
    assert PhononSettings(supercell=[2, 3, 4]).supercell == (2, 3, 4)  # as given, not expanded to a matrix
    assert KappaSettings(method="RTA", temperatures=300, mesh=19, fc3_supercell=2) == KappaSettings(
        method="rta", temperatures=(300.0,), mesh=(19, 19, 19), fc3_supercell=2)
    assert KappaSettings(mesh=7).q_mesh({"q_point_mesh": [5, 5, 5]}) == [7, 7, 7]
    assert KappaSettings().q_mesh({"q_point_mesh": [5, 5, 5]}) == [5, 5, 5]
    assert KappaSettings().q_mesh({}) == [20, 20, 20]
    with pytest.raises(dataclasses.FrozenInstanceError):
        KappaSettings().method = "rta"
    with pytest.raises(TypeError):
        PhononSettings(4)  # settings are named, never positional


def test_workflows_refuse_other_settings_and_unknown_keywords():
    cu = bulk("Cu", "fcc", a=3.6)
    with pytest.raises(TypeError, match="run_phonons: settings must be a PhononSettings, got int"):
        run_phonons(cu, EMT, 4)  # the supercell was the third positional argument before settings
    with pytest.raises(TypeError, match="run_phonons: settings must be a PhononSettings, got KappaSettings"):
        run_phonons(cu, EMT, KappaSettings())
    with pytest.raises(TypeError, match=r"run_phonons\(\) got an unexpected keyword argument 'suprcell'"):
        run_phonons(cu, EMT, suprcell=4)
    with pytest.raises(TypeError, match="run_kappa: settings must be a KappaSettings, got PhononSettings"):
        run_kappa(cu, EMT, PhononSettings())
    with pytest.raises(TypeError, match=r"run_kappa\(\) got an unexpected keyword argument 'no_shear'"):
        run_kappa(cu, EMT, no_shear=True)  # a phonon setting, not a κ one
    with pytest.raises(ValueError, match="method must be one of"):
        run_kappa(cu, EMT, KappaSettings(), method="bte")  # an override is checked as the settings are


# ------------------------------------------------------------------------------- command line
def _args(command, *options):
    return build_parser().parse_args([command, "cu.cif", "--model", EMT, *options])


def test_the_command_line_defaults_are_the_settings_defaults():
    assert phonons_cli.settings_from_args(_args("phonons")) == PhononSettings()
    assert kappa_cli.settings_from_args(_args("kappa")) == KappaSettings()


def test_the_command_line_sets_every_option_through_one_path():
    phonons = phonons_cli.settings_from_args(_args(
        "phonons", "--displacement", "0.02", "--no-relax", "--fmax", "0.01", "--relax-steps", "5",
        "--keep-residual-forces", "--supercell", "2", "3", "4", "--min-width", "9", "--imaginary-tol", "0.1",
        "--mesh", "8", "--no-shear", "--tmin", "10", "--tmax", "20", "--tstep", "5"))
    assert phonons == PhononSettings(displacement=0.02, relax=False, fmax=0.01, relax_steps=5,
                                     subtract_residual_forces=False, supercell=[2, 3, 4], min_width=9.0,
                                     imaginary_tol=0.1, mesh=8, no_shear=True, temperatures=(10, 20, 5))
    kappa = kappa_cli.settings_from_args(_args(
        "kappa", "--displacement", "0.02", "--no-relax", "--fmax", "0.01", "--relax-steps", "5",
        "--keep-residual-forces", "--fc2-supercell", "2", "--fc3-supercell", "3", "3", "3", "--mesh", "9",
        "--temperatures", "300", "400", "--method", "rta", "--no-isotopes"))
    assert kappa == KappaSettings(displacement=0.02, relax=False, fmax=0.01, relax_steps=5,
                                  subtract_residual_forces=False, fc2_supercell=2, fc3_supercell=(3, 3, 3),
                                  mesh=9, temperatures=(300, 400), method="rta", isotopes=False)


def test_a_bad_command_line_value_is_the_settings_error():
    with pytest.raises(ValueError, match="displacement must be a positive distance up to 0.5 Å, got 0.7"):
        phonons_cli.settings_from_args(_args("phonons", "--displacement", "0.7"))
    with pytest.raises(ValueError, match="mesh numbers must be >= 1"):
        phonons_cli.settings_from_args(_args("phonons", "--mesh", "0"))
    with pytest.raises(ValueError, match="singular"):
        kappa_cli.settings_from_args(_args("kappa", "--fc3-supercell", "0"))
