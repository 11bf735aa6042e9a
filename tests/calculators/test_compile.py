"""MLIPCalculator(..., compile=True) and ``--compile``: the compiled evaluation (energy, forces and stress
in one graph) gives the eager results on structures of several sizes (float64 to rounding, float32 to
~1e-5) and the same results as the eager potential, bit for bit, when its function runs uncompiled; a
failed compilation warns and runs eagerly; the CLI flag reaches the calculator."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from ase.build import bulk

from mlip.calculators import MLIPCalculator
from mlip.calculators import compiled_network
from mlip.calculators.compiled_network import CompileFallbackWarning, CompiledEvaluation, is_compiled
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


# Compiling on a CPU takes minutes (the first call; later sizes reuse the dynamic-shape graph), so one
# small architecture is compiled here, in float64 (float32's agreement, within 4e-6 for the default model,
# is in docs/speed.md; CI's main job has 15 minutes): the Platonic Transformer whose attention
# reaches less far than its graph (the edges within the attention cutoff are selected before the compiled
# graph) and which carries the embedded-atom term. The shipped models' compiled results are checked
# against eager ones by benchmarks/speed/small_cell_latency.py and compile_cost.py; test_every_architecture_
# takes_the_option prepares every architecture without compiling, and test_uncompiled_evaluation_is_
# the_potential runs the compiled function of each one uncompiled.
@pytest.mark.slow
@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-10)])
def test_compiled_equals_eager(dtype, rtol):
    potential = build_potential("platonic-density-reach", species=SPECIES)
    eager = MLIPCalculator(potential, device="cpu", dtype=dtype)
    compiled = MLIPCalculator(potential, device="cpu", dtype=dtype, compile=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileFallbackWarning)  # a fall-back would test eager against eager
        for atoms in structures():
            e_ref, f_ref, s_ref = evaluate(eager, atoms)
            e, f, s = evaluate(compiled, atoms)
            label = f"{dtype}, {atoms.get_chemical_formula()}"
            assert_close(e, e_ref, f"energy ({label})", rtol)
            assert_close(f, f_ref, f"forces ({label})", rtol)
            assert_close(s, s_ref, f"stress ({label})", rtol)
    assert is_compiled(compiled)
    # the calculator's potential is not modified: same weights, the network's own forward
    assert compiled.potential.state_dict().keys() == eager.potential.state_dict().keys()
    assert "forward" not in compiled.potential.model.__dict__


def uncompiled(fn, **kwargs):
    """torch.compile that returns the function itself: the compiled evaluation's function runs eagerly."""
    return fn


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_uncompiled_evaluation_is_the_potential(monkeypatch, arch):
    """What the compiler is given (the species looked up and the attention edges selected beforehand,
    ``Potential.forward`` inside) gives the eager potential's results bit for bit, with and without a
    cell (no stress), so the compiled graph can differ from eager only by the compiler's rounding."""
    monkeypatch.setattr(compiled_network.torch, "compile", uncompiled)
    potential = build_potential(arch, species=SPECIES)
    eager = MLIPCalculator(potential, device="cpu", dtype="float64")
    compiled = MLIPCalculator(potential, device="cpu", dtype="float64", compile=True)
    if arch.endswith("-reach") or arch == "equiformer-v3-gate-sepnorm":
        assert compiled.compiled.attention_cutoff == 3.0
    molecule = structures()[3].copy()
    molecule.pbc = False
    molecule.cell = None
    for atoms in [structures()[3], molecule]:
        atoms = atoms.copy()
        atoms.calc = eager
        ref = (atoms.get_potential_energy(), atoms.get_forces(), atoms.get_potential_energies())
        atoms.calc = compiled
        got = (atoms.get_potential_energy(), atoms.get_forces(), atoms.get_potential_energies())
        for x, y in zip(got, ref):
            assert np.array_equal(x, y)
        if atoms.pbc.all():
            stress = atoms.get_stress()
            atoms.calc = eager
            assert np.array_equal(stress, atoms.get_stress())
    assert is_compiled(compiled)


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
    assert not is_compiled(compiled)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileFallbackWarning)  # warned once, eager from then on
        evaluate(compiled, structures()[2])


def test_genuine_error_is_not_swallowed(monkeypatch):
    """An error that the eager network raises too propagates (it is not a compilation failure)."""
    monkeypatch.setattr(compiled_network.torch, "compile", failing_compile)
    potential = build_potential("platonic-softmax", species=SPECIES)
    calc = MLIPCalculator(potential, device="cpu", dtype="float64", compile=True)

    def broken(*args, **kwargs):
        raise ValueError("broken network")

    calc.potential.model.forward = broken
    with pytest.raises(ValueError, match="broken network"):
        evaluate(calc, structures()[0])


def test_compile_option_is_lazy_and_leaves_the_potential(monkeypatch):
    """compile=True prepares the compiled evaluation without compiling (nothing is traced before the first
    call) and leaves the calculator's potential as it is (its network's own forward, its weights)."""
    traced = []
    monkeypatch.setattr(compiled_network.torch, "compile", lambda fn, **kw: traced.append(fn) or fn)
    potential = build_potential("platonic-softmax", species=SPECIES)
    calc = MLIPCalculator(potential, device="cpu", dtype="float64", compile=True)
    assert isinstance(calc.compiled, CompiledEvaluation) and calc.compiled.potential is calc.potential
    assert traced == [calc.compiled.evaluate]  # handed to torch.compile, which compiles at the first call
    assert "forward" not in calc.potential.model.__dict__
    assert calc.potential.state_dict().keys() == potential.state_dict().keys()
    assert MLIPCalculator(potential, device="cpu", dtype="float64").compiled is None


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
    assert isinstance(calc.compiled, CompiledEvaluation)
    assert plain.compiled is None
    calc, _ = load_model("ase.calculators.emt:EMT", "cpu", "float64", compile=True)
    assert "--compile applies to mlip models only" in capsys.readouterr().err


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_every_architecture_takes_the_option(arch):
    """compile=True prepares every physics-suite architecture (the eager warm-up call on two atoms
    runs, the compiled evaluation is made) and leaves its potential unchanged."""
    potential = build_potential(arch, species=SPECIES)
    calc = MLIPCalculator(potential, device="cpu", dtype="float64", compile=True)
    assert isinstance(calc.compiled, CompiledEvaluation) and calc.compiled.failure is None
    assert calc.potential.state_dict().keys() == potential.state_dict().keys()


def test_first_line_joins_a_heading_that_ends_in_a_colon():
    """The warning's one line names the compiler's problem, not only "backend='inductor' raised:"."""
    err = RuntimeError("backend='inductor' raised:\n\nCppCompileError: C++ compile error\nmore detail")
    assert compiled_network.first_line(err) == (
        "RuntimeError: backend='inductor' raised: CppCompileError: C++ compile error")
    assert compiled_network.first_line(ValueError("one\ntwo")) == "ValueError: one"
    hint = "AssertionError: \nSet TORCHDYNAMO_VERBOSE=1 for the internal stack trace"
    assert compiled_network.first_line(RuntimeError(hint)) == "RuntimeError: AssertionError:"
    assert compiled_network.first_line(ValueError("")) == "ValueError"
