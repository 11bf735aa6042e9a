"""Float32 safety of the envelope and of the envelope-weighted softmax, alone and inside the models."""

import numpy as np
import pytest
import torch

from mlip.nn import PolynomialEnvelope, envelope_exp


@pytest.mark.parametrize("p", [3, 5, 7])
def test_envelope_factored_form_is_the_polynomial_and_keeps_precision_near_the_cutoff(p):
    env = PolynomialEnvelope(5.0, p)
    r = torch.linspace(0, 5.5, 1001, dtype=torch.float64)
    d = r / 5.0
    a, b, c = (p + 1) * (p + 2) / 2, p * (p + 2.0), p * (p + 1) / 2
    expanded = torch.where(d < 1, 1 - a * d**p + b * d ** (p + 1) - c * d ** (p + 2), torch.zeros_like(d))
    assert (env(r) - expanded).abs().max() < 1e-13
    # float32 near the cutoff: relative error limited by rounding 1 − d (≈ 1e-7 / (1 − d)), not by
    # cancellation between O(1) terms (which gave errors of 10 % and more at φ ≈ 1e-6).
    near = torch.tensor([4.9, 4.99, 4.999], dtype=torch.float32)
    rel = (env(near).double() - env(near.double())).abs() / env(near.double())
    assert rel.max() < 1e-3
    naive = 1 - a * (near / 5) ** p + b * (near / 5) ** (p + 1) - c * (near / 5) ** (p + 2)
    assert ((naive.double() - env(near.double())).abs() / env(near.double())).max() > 10 * rel.max()


def test_envelope_exp_is_float32_safe():
    # Node 0: a huge logit on an edge almost at the cutoff (φ = 1e-20: in float32, 1 − r/r_c ≥ 1e-7 gives
    # φ ≳ 1e-21); node 1: ordinary logits; node 2: φ = 0 only.
    logits = torch.tensor([[150.0], [0.0], [1.0], [2.0], [3.0], [500.0]], dtype=torch.float64)
    env = torch.tensor([1e-20, 1.0, 0.5, 1.0, 0.25, 0.0], dtype=torch.float64)
    index = torch.tensor([0, 0, 1, 1, 1, 2])
    ref = env[:, None] * torch.exp(logits - logits.max())  # exact up to the shift, in float64
    ratio_ref = [ref[index == k] / ref[index == k].sum() for k in range(2)]
    out32 = envelope_exp(logits.float(), env.float(), index, 3)
    assert torch.isfinite(out32).all()
    for k in range(2):
        sel = index == k
        assert torch.allclose((out32[sel] / out32[sel].sum()).double(), ratio_ref[k], rtol=1e-5, atol=1e-30)
        assert out32[sel].max() == pytest.approx(1.0)  # the largest term is exactly 1 (m is shifted by log φ)
    assert out32[5] == 0  # φ = 0 contributes exactly nothing
    # Gradients stay finite, and an edge with φ = 0 gets none.
    z = logits.float().clone().requires_grad_(True)
    e = env.float().clone().requires_grad_(True)
    envelope_exp(z, e, index, 3).sum().backward()
    assert torch.isfinite(z.grad).all() and torch.isfinite(e.grad).all()
    assert z.grad[5] == 0


@pytest.mark.parametrize("arch", ["platonic-softmax", "equiformer-v3"])
def test_models_agree_in_float32_and_float64_with_sharp_attention(arch):
    """Large query/key weights make the softmax sharp, so an edge near the cutoff can dominate: the
    float32 forces must still agree with float64 (a trained Platonic model was off by 10³ eV/Å)."""
    from ase.build import bulk

    import mlip
    from mlip.testing import build_potential

    potential = build_potential(arch, species=["Cu", "Au"], cutoff=4.0)
    with torch.no_grad():
        for name, prm in potential.named_parameters():
            if any(key in name for key in ("q_proj", "k_proj", "alpha_dot", "so2_1.m0")):
                prm.mul_(8.0)
    atoms = bulk("Cu", "fcc", a=3.61, cubic=True) * (2, 2, 1)
    atoms.rattle(0.15, seed=3)
    atoms.numbers[::3] = 79
    results = {}
    for dtype in ("float64", "float32"):
        a = atoms.copy()
        a.calc = mlip.MLIPCalculator(potential, device="cpu", dtype=dtype)
        results[dtype] = a.get_forces()
    scale = np.abs(results["float64"]).max()
    assert np.abs(results["float32"] - results["float64"]).max() < 1e-3 * scale
