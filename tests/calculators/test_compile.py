"""MLIPCalculator(..., compile=True) and ``--compile``: the compiled network gives the eager energy,
forces and stress (float64, 1e-6 relative) on structures of several sizes; a failed compilation
warns and runs eagerly; the CLI flag reaches the calculator."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
from ase.build import bulk

from mlip.calculators import MLIPCalculator
from mlip.calculators import compiled_network
from mlip.calculators.compiled_network import CompileFallbackWarning, CompiledForward, is_compiled
from mlip.testing import ARCHITECTURES, build_potential

SPECIES = ["Cu", "Au"]


def structures():
    """Periodic cells of 4, 8 and 32 atoms (new sizes: recompilation or dynamic shapes) and one of
    mixed species, rattled so that forces and stress are not zero by symmetry."""
    out = []
    for k, reps in enumerate([(1, 1, 1), (1, 1, 2), (2, 2, 2)]):
        atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * reps
        atoms.rattle(0.1, seed=k)
        out.append(atoms)
    mixed = bulk("Cu", "fcc", a=3.7, cubic=True) * (1, 2, 1)
    mixed.symbols[[1, 4, 6]] = "Au"
    mixed.rattle(0.1, seed=7)
    out.append(mixed)
    return out


def evaluate(calc, atoms):
    atoms = atoms.copy()
    atoms.calc = calc
    return atoms.get_potential_energy(), atoms.get_forces(), atoms.get_stress()


def assert_close(got, ref, what, rtol=1e-6):
    got, ref = np.asarray(got, float), np.asarray(ref, float)
    scale = max(float(np.abs(ref).max()), 1e-12)
    err = float(np.abs(got - ref).max()) / scale
    assert err <= rtol, f"{what}: compiled differs from eager by {err:.2e} (relative to {scale:.3g})"


# Compiling a network on a CPU takes minutes (the first call; later sizes reuse the dynamic-shape
# graph), so one architecture is compiled here: the Platonic Transformer of the shipped default.
# EquiformerV3 takes ~10 minutes to compile on 2 cores, beyond the CI budget; its compiled
# results are checked against eager ones by benchmarks/speed/compile_cost.py (max_rel_diff of each row),
# and test_every_architecture_takes_the_option prepares every architecture without compiling.
@pytest.mark.slow
@pytest.mark.parametrize("arch", ["platonic-softmax"])
def test_compiled_equals_eager(arch):
    potential = build_potential(arch, species=SPECIES)
    eager = MLIPCalculator(potential, device="cpu", dtype="float64")
    compiled = MLIPCalculator(potential, device="cpu", dtype="float64", compile=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileFallbackWarning)  # a fall-back would test eager against eager
        for atoms in structures():
            e_ref, f_ref, s_ref = evaluate(eager, atoms)
            e, f, s = evaluate(compiled, atoms)
            label = f"{arch}, {atoms.get_chemical_formula()}"
            assert_close(e, e_ref, f"energy ({label})")
            assert_close(f, f_ref, f"forces ({label})")
            assert_close(s, s_ref, f"stress ({label})")
    assert is_compiled(compiled.potential)
    # the weights are the eager module's: same state_dict keys and values (checkpoints unchanged)
    assert compiled.potential.state_dict().keys() == eager.potential.state_dict().keys()


def failing_compile(fn, **kwargs):
    def compiled(*args, **kw):
        raise RuntimeError("InductorError: no working C++ compiler found\nsecond line of the report")

    return compiled


def test_failed_compilation_warns_and_runs_eagerly(monkeypatch):
    monkeypatch.setattr(compiled_network.torch, "compile", failing_compile)
    potential = build_potential("platonic-softmax", species=SPECIES)
    eager = MLIPCalculator(potential, device="cpu", dtype="float64")
    compiled = MLIPCalculator(potential, device="cpu", dtype="float64", compile=True)
    atoms = structures()[1]
    with pytest.warns(CompileFallbackWarning, match=r"torch.compile failed .*no working C\+\+ compiler"):
        e, f, s = evaluate(compiled, atoms)
    e_ref, f_ref, s_ref = evaluate(eager, atoms)
    assert e == e_ref and np.array_equal(f, f_ref) and np.array_equal(s, s_ref)
    assert not is_compiled(compiled.potential)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileFallbackWarning)  # warned once, eager from then on
        evaluate(compiled, structures()[2])


def test_genuine_error_is_not_swallowed(monkeypatch):
    """An error that the eager network raises too propagates (it is not a compilation failure)."""
    monkeypatch.setattr(compiled_network.torch, "compile", failing_compile)
    potential = build_potential("platonic-softmax", species=SPECIES)
    calc = MLIPCalculator(potential, device="cpu", dtype="float64", compile=True)
    forward = calc.potential.model.forward

    def broken(*args, **kwargs):
        raise ValueError("broken network")

    forward.eager = broken
    with pytest.raises(ValueError, match="broken network"):
        evaluate(calc, structures()[0])


def test_compile_option_is_lazy_and_copyable():
    """compile=True installs the compiled forward without compiling yet; a deep copy of the potential
    gets its own compiled forward bound to the copy (not to the original module)."""
    potential = build_potential("platonic-softmax", species=SPECIES)
    calc = MLIPCalculator(potential, device="cpu", dtype="float64", compile=True)
    forward = calc.potential.model.__dict__["forward"]
    assert isinstance(forward, CompiledForward) and forward.module is calc.potential.model
    assert "forward" not in potential.model.__dict__  # the caller's potential is left eager
    copied = copy.deepcopy(calc.potential)
    new_forward = copied.model.__dict__["forward"]
    assert isinstance(new_forward, CompiledForward) and new_forward.module is copied.model
    compiled_network.compile_network(calc.potential, torch.float64)  # idempotent
    assert calc.potential.model.__dict__["forward"] is forward


def test_isolated_reference_cached_before_compiling():
    """With isolated_reference the no-edge evaluation happens eagerly, before the network is compiled."""
    potential = build_potential("platonic-softmax", species=SPECIES)
    potential.isolated_reference = True
    calc = MLIPCalculator(potential, device="cpu", dtype="float64", compile=True)
    assert calc.potential._isolated_cache is not None


@pytest.mark.parametrize("command", [
    ["md", "s.xyz"], ["relax", "s.xyz"], ["phonons", "s.xyz"], ["kappa", "s.xyz"],
    ["discovery", "relax", "s.json"],
])
def test_cli_compile_flag_parsed(command):
    from mlip.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(command + ["--compile"]).compile is True
    assert parser.parse_args(command).compile is False


def test_cli_compile_reaches_the_calculator(capsys):
    from mlip.cli.common import load_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calc, _ = load_model("platonic-emt", "cpu", "float64", compile=True)
        plain, _ = load_model("platonic-emt", "cpu", "float64")
    assert isinstance(calc.potential.model.__dict__.get("forward"), CompiledForward)
    assert "forward" not in plain.potential.model.__dict__
    calc, _ = load_model("ase.calculators.emt:EMT", "cpu", "float64", compile=True)
    assert "--compile applies to mlip models only" in capsys.readouterr().err


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_every_architecture_takes_the_option(arch):
    """compile=True prepares every physics-suite architecture (the eager warm-up call on two atoms
    runs, the compiled forward is installed) and leaves its outputs unchanged until the first call."""
    potential = build_potential(arch, species=SPECIES)
    calc = MLIPCalculator(potential, device="cpu", dtype="float64", compile=True)
    assert isinstance(calc.potential.model.__dict__["forward"], CompiledForward)
    assert calc.potential.state_dict().keys() == potential.state_dict().keys()
