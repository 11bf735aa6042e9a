"""Faster formulations of model layers (issue 56) against the formulations they replaced.

Each ``*_reference`` below is the replaced forward pass, kept verbatim. A training step differentiates
the energy twice (forces and stress with ``create_graph=True``, then the loss with respect to the
weights), so every test compares, in float64, the energies, forces, stress and the weight gradients of
a loss on all three, with the reference patched in and without: they must agree to rounding.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from ase.build import bulk

import mlip
from mlip.models import create_model
from mlip.models.equiformer_v3 import model as equiformer_model
from mlip.models.equiformer_v3.radial_mlp import EdgeMLP
from mlip.models.equiformer_v3.so2_linear import SO2Linear
from mlip.models.platonic.attention import FrameAttention
from mlip.models.platonic.group_linear import GroupLinear
from mlip.nn import envelope_exp, scatter_sum
from mlip.testing import build_potential

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------ replaced forwards
def so2_linear_reference(self, x, radial=None):
    """SO2Linear before: W_r, W_i stacked applied to x₊ and x₋, then y₊ = W_r x₊ − W_i x₋ and
    y₋ = W_r x₋ + W_i x₊ summed from the halves."""
    e = x.shape[0]
    n0 = self.lmax + 1
    c_in, c_out = self.in_channels, self.out_channels
    sizes = [n0] + [2 * n for _, _, n in self.blocks[1:]]
    parts = torch.split(x, sizes, dim=1)
    x0 = parts[0] if radial is None else parts[0] * radial
    y0, extra = torch.split(self.m0(x0.reshape(e, n0 * c_in)), [n0 * c_out, self.extra], dim=1)
    out = [y0.reshape(e, n0, c_out)]
    for layer, (m, _, n), part in zip(self.m_pos, self.blocks[1:], parts[1:]):
        pair = part.reshape(e, 2, n, c_in)
        if radial is not None:
            pair = pair * radial[:, None, m:, :]
        y = layer(pair.reshape(e, 2, n * c_in)).reshape(e, 2, 2, n, c_out)
        (pos_r, pos_i), (neg_r, neg_i) = (half.unbind(1) for half in y.unbind(1))
        out += [pos_r - neg_i, neg_r + pos_i]
    return torch.cat(out, dim=1), extra


def edge_mlp_reference(self, rbf, species_src, species_tgt):
    """EdgeMLP before: the MLP of the concatenation [rbf; e_src[Z_j]; e_tgt[Z_i]]."""
    h = torch.cat([rbf, self.source_embedding(species_src).to(rbf.dtype),
                   self.target_embedding(species_tgt).to(rbf.dtype)], dim=-1)
    return self.mlp(h)


def frame_attention_reference(self, x, edge_index, frame_vec, radial, envelope):
    """FrameAttention before: the rotations of channel pairs written out in real arithmetic."""
    n, G, _ = x.shape
    H, F = self.num_heads, self.head_dim // 2
    i, j = edge_index[0], edge_index[1]
    cos, sin = self.rope(frame_vec)
    q = self.q_proj(x).view(n, G, H, F, 2).index_select(0, i)
    q0, q1 = q[..., 0], q[..., 1]
    if self.k_proj is not None:
        k = self.k_proj(x).view(n, G, H, F, 2).index_select(0, j)
        k0, k1 = k[..., 0], k[..., 1]
        logits = (cos * (q0 * k0 + q1 * k1) + sin * (q1 * k0 - q0 * k1)).sum(-1)
    else:
        logits = (cos * (q0 + q1) + sin * (q1 - q0)).sum(-1)
    logits = logits * self.inv_sqrt_dim + self.radial_bias(radial).unsqueeze(1)
    env = envelope.view(-1, 1, 1)
    if self.attention == "softmax":
        w = envelope_exp(logits, envelope, i, n)
        denom = scatter_sum(w, i, n)
    else:
        w = env * logits
        denom = scatter_sum(envelope, i, n).view(n, 1, 1)
    v = self.v_proj(x).view(n, G, H, F, 2).index_select(0, j)
    if self.value_filter is not None:
        v = v * (1.0 + self.value_filter(radial)).view(-1, 1, H, F, 2)
    v0, v1 = v[..., 0], v[..., 1]
    wc = w.unsqueeze(-1) * cos
    ws = w.unsqueeze(-1) * sin
    msg = torch.stack((wc * v0 - ws * v1, ws * v0 + wc * v1), dim=-1)
    out = scatter_sum(msg, i, n) / denom[..., None, None]
    return self.out_proj(out.reshape(n, G, H * 2 * F))


def group_linear_reference(self, x):
    """GroupLinear before: the bias added after the matmul."""
    G = self.group_order
    lead = x.shape[:-2]
    y = torch.nn.functional.linear(x.reshape(*lead, G * self.in_channels), self.dense_weight())
    y = y.view(*lead, G, self.out_channels)
    if self.bias is not None:
        y = y + self.bias
    return y


def edge_mlps_reference(mlps, rbf, species_src, species_tgt):
    """The edge MLPs before: one after another."""
    return [edge_mlp_reference(m, rbf, species_src, species_tgt) for m in mlps]


# per architecture: (owner, attribute, the replaced function)
REFERENCES = {"equiformer_v3": [(SO2Linear, "forward", so2_linear_reference),
                                (equiformer_model, "edge_mlps", edge_mlps_reference)],
              "platonic": [(FrameAttention, "forward", frame_attention_reference),
                           (GroupLinear, "forward", group_linear_reference)]}


# ------------------------------------------------------------------------------------ the step
def recipe_potential(recipe: str):
    """The model of a shipped recipe (its stage1.yaml) in float64, with random weights and no zero ones."""
    args = dict(yaml.safe_load((ROOT / "examples" / "recipes" / recipe / "stage1.yaml").read_text())["model"])
    potential = create_model(args.pop("name"), seed=0, **args).double()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in potential.model.parameters():  # zero-initialised weights and biases too
            p.add_(0.2 * torch.randn(p.shape, generator=generator, dtype=p.dtype))
    return potential


def graph_for(species, cutoff):
    """Two rattled periodic cells of the potential's elements, one of them sheared."""
    a, b = (species * 2)[:2]
    first = bulk(a, "diamond", a=5.4, cubic=True)
    first.symbols[[1, 4]] = b
    first.rattle(0.1, seed=1)
    second = bulk(b, "fcc", a=3.9) * (2, 2, 1)
    shear = [[1.0, 0.05, 0.0], [0.0, 1.0, 0.03], [0.0, 0.0, 0.98]]
    second.set_cell(second.cell.array @ shear, scale_atoms=True)
    second.rattle(0.1, seed=2)
    return mlip.batch_atoms([first, second], cutoff, dtype=torch.float64)


def step_quantities(potential, graph):
    """Energy [B], forces, stress and the gradients of a loss on all three with respect to every weight."""
    potential.zero_grad()
    out = potential(graph, compute_forces=True, compute_stress=True, create_graph=True)
    loss = (out["energy"] ** 2).sum() + (out["forces"] ** 2).sum() + (out["stress"] ** 2).sum()
    loss.backward()
    values = {k: out[k].detach().clone() for k in ("energy", "forces", "stress")}
    values.update({name: p.grad.clone() for name, p in potential.named_parameters() if p.grad is not None})
    return values


def assert_equal_to_rounding(new, old):
    assert new.keys() == old.keys()
    # a gradient that vanishes exactly (the softmax is blind to a bias shared by a node's edges) is
    # rounding noise in both: it is compared on the scale of the largest gradient
    scale = max(float(v.abs().max()) for v in old.values())
    for key in old:
        floor = scale if key not in ("energy", "forces", "stress") else 0.0
        tol = 1e-11 * max(float(old[key].abs().max()), floor)
        err = float((new[key] - old[key]).abs().max())
        assert err <= tol, f"{key}: differs by {err:.2e} (tolerance {tol:.2e})"


POTENTIALS = {
    "equiformer_v3-sige": lambda: recipe_potential("equiformer_v3-sige"),
    "platonic-sige": lambda: recipe_potential("platonic-sige"),
    "equiformer-v3": lambda: build_potential("equiformer-v3", species=["Cu", "Au"]),
    "equiformer-v3-gate-sepnorm": lambda: build_potential("equiformer-v3-gate-sepnorm", species=["Cu", "Au"]),
    "platonic-density": lambda: build_potential("platonic-density", species=["Cu", "Au"]),
    "platonic-linear": lambda: build_potential("platonic-linear", species=["Cu", "Au"]),
    "platonic-keyless": lambda: create_model("platonic", species=["Cu", "Au"], cutoff=4.0, channels=4,
                                             num_layers=1, num_heads=2, head_dim=2, use_key=False,
                                             radial_values=True, seed=0).double(),
}


@pytest.mark.parametrize("name", sorted(POTENTIALS))
def test_a_training_step_equals_the_replaced_formulation(name, monkeypatch):
    potential = POTENTIALS[name]()
    graph = graph_for(potential.species, potential.cutoff)
    new = step_quantities(potential, graph)
    calls = []
    for owner, attribute, reference in REFERENCES[potential.architecture]:
        monkeypatch.setattr(owner, attribute, lambda *args, _ref=reference, **kwargs:
                            calls.append(_ref) or _ref(*args, **kwargs))
    old = step_quantities(potential, graph)
    # the replaced functions ran (the comparison is not vacuous), then the two agree to rounding
    assert {ref for _, _, ref in REFERENCES[potential.architecture]} == set(calls)
    assert_equal_to_rounding(new, old)


@pytest.mark.parametrize("name", ["platonic-sige", "platonic-keyless"])
def test_the_platonic_rotation_written_for_torch_compile_equals_the_complex_product(name, monkeypatch):
    """Under torch.compile the channel-pair rotation is real arithmetic (inductor has no complex code)."""
    potential = POTENTIALS[name]()
    graph = graph_for(potential.species, potential.cutoff)
    eager = step_quantities(potential, graph)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert_equal_to_rounding(step_quantities(potential, graph), eager)


def test_an_edge_mlp_on_its_own_is_the_mlp_of_the_concatenated_inputs():
    """EdgeMLP.forward (one MLP through edge_mlps) against the replaced forward, values and gradients."""
    torch.manual_seed(0)
    mlp = EdgeMLP(6, 3, 8, [8, 8, 12]).double()
    rbf = torch.randn(40, 6, dtype=torch.float64, requires_grad=True)
    src, tgt = torch.randint(0, 3, (40,)), torch.randint(0, 3, (40,))
    results = []
    for forward in (EdgeMLP.forward, edge_mlp_reference):
        mlp.zero_grad()
        out = forward(mlp, rbf, src, tgt)
        (g,) = torch.autograd.grad((out ** 2).sum(), rbf, create_graph=True)
        (g ** 2).sum().backward()
        grads = {n: p.grad.clone() for n, p in mlp.named_parameters()}
        results.append({"out": out.detach(), "grad": g.detach(), **grads})
    assert_equal_to_rounding(*results)
