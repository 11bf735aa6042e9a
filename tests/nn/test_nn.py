"""Each building block of mlip.nn against its definition, computed directly (loops, formulas)."""

import math

import pytest
import torch

from mlip.nn import (LOG_CENTRE, LOG_EPSILON, LOG_RATES, BesselBasis, GaussianBasis, LogDensities,
                     PolynomialEnvelope, edge_indices_within, edges_within, element_resolved_sums,
                     envelope_exp, require_edges_beyond_attention, resolve_attention_cutoff, safe_length,
                     scatter_max, scatter_sum)


def test_safe_length_is_the_norm_and_has_a_zero_gradient_at_zero():
    vectors = torch.tensor([[0.0, 0.0, 0.0], [3.0, 4.0, 0.0], [1.0, -2.0, 2.0]], dtype=torch.float64,
                           requires_grad=True)
    length = safe_length((vectors * vectors).sum(-1))
    assert length.tolist() == [0.0, 5.0, 3.0]
    (grad,) = torch.autograd.grad(length.sum(), vectors)
    assert grad[0].tolist() == [0.0, 0.0, 0.0]
    torch.testing.assert_close(grad[1:], vectors[1:].detach() / length[1:, None].detach(), rtol=1e-15, atol=0)


@pytest.mark.parametrize("p", [3, 5, 7])
def test_polynomial_envelope_is_one_at_zero_and_vanishes_to_second_order_at_the_cutoff(p):
    cutoff = 4.0
    env = PolynomialEnvelope(cutoff, p)
    r = torch.tensor([0.0, cutoff, cutoff + 0.5], dtype=torch.float64, requires_grad=True)
    value = env(r)
    (first,) = torch.autograd.grad(value.sum(), r, create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), r)
    assert value.tolist() == [1.0, 0.0, 0.0]
    first, second = first.detach(), second.detach()
    assert abs(float(first[1])) < 1e-12 and abs(float(second[1])) < 1e-10  # C² at r_c
    assert float(first[0]) == 0.0  # φ′(0) = 0: the envelope starts flat
    assert first[2] == 0.0 and second[2] == 0.0  # and stays 0 beyond r_c
    with pytest.raises(ValueError, match="cutoff must be positive"):
        PolynomialEnvelope(0.0, p)


def test_bessel_basis_is_the_formula_with_its_limit_at_zero():
    cutoff, n = 5.0, 6
    basis = BesselBasis(cutoff, n)
    r = torch.tensor([0.0, 0.3, 1.7, 4.9], dtype=torch.float64)
    out = basis(r)
    assert out.shape == (4, n)
    for a, radius in enumerate(r.tolist()):
        for k in range(1, n + 1):
            if radius == 0.0:
                expected = math.sqrt(2 / cutoff) * k * math.pi / cutoff
            else:
                expected = math.sqrt(2 / cutoff) * math.sin(k * math.pi * radius / cutoff) / radius
            assert math.isclose(float(out[a, k - 1]), expected, rel_tol=1e-13, abs_tol=1e-15)


def test_gaussian_basis_is_the_formula():
    cutoff, n, width = 4.0, 5, 0.7
    basis = GaussianBasis(cutoff, n, width=width)
    r = torch.tensor([0.0, 1.3, 3.9], dtype=torch.float64)
    out = basis(r)
    for a, radius in enumerate(r.tolist()):
        for k in range(n):
            centre = k * cutoff / (n - 1)
            assert math.isclose(float(out[a, k]), math.exp(-0.5 * ((radius - centre) / width) ** 2), rel_tol=1e-14)
    assert GaussianBasis(cutoff, n).width == cutoff / (n - 1)


def test_scatter_sum_and_max_are_the_loops():
    generator = torch.Generator().manual_seed(0)
    src = torch.randn(9, 2, generator=generator, dtype=torch.float64)
    index = torch.tensor([0, 2, 2, 0, 3, 2, 0, 3, 3])
    total, largest = scatter_sum(src, index, 5), scatter_max(src, index, 5)
    for segment in range(5):
        rows = [src[e] for e in range(9) if int(index[e]) == segment]
        expected_sum = torch.zeros(2, dtype=torch.float64)
        for row in rows:
            expected_sum = expected_sum + row
        torch.testing.assert_close(total[segment], expected_sum, rtol=1e-15, atol=0)
        if rows:
            assert largest[segment].tolist() == torch.stack(rows).max(0).values.tolist()
        else:  # an empty segment: the sum is 0, the maximum −∞
            assert total[segment].tolist() == [0.0, 0.0]
            assert largest[segment].tolist() == [-math.inf, -math.inf]


@pytest.mark.slow
def test_scatter_sum_into_one_segment_compiles_on_two_threads():
    """One structure's energy (a sum into one segment) compiles with two threads: torch 2.13's inductor
    cannot generate the parallel atomic-add scatter into a single row, so traced it is a plain sum."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        compiled = torch.compile(lambda src, index, n: scatter_sum(src * 2.0, index, n), dynamic=True,
                                 fullgraph=True)
        for rows in (5, 7):
            src = torch.randn(rows, 3, dtype=torch.float64)
            index = torch.zeros(rows, dtype=torch.int64)
            torch.testing.assert_close(compiled(src, index, 1), scatter_sum(src * 2.0, index, 1),
                                       rtol=1e-15, atol=1e-15)
    finally:
        torch.set_num_threads(threads)


def test_envelope_exp_normalises_to_the_enveloped_softmax():
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(7, 3, generator=generator, dtype=torch.float64) * 3
    envelope = torch.tensor([1.0, 0.4, 0.0, 0.9, 0.05, 1.0, 0.7], dtype=torch.float64)
    index = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    num = envelope_exp(logits, envelope, index, 2)
    weights = num / scatter_sum(num, index, 2).index_select(0, index)
    for e in range(7):
        node = [f for f in range(7) if int(index[f]) == int(index[e])]
        denominator = sum(float(envelope[f]) * torch.exp(logits[f]) for f in node)
        torch.testing.assert_close(weights[e], envelope[e] * torch.exp(logits[e]) / denominator,
                                   rtol=1e-13, atol=1e-15)
    assert num[2].tolist() == [0.0, 0.0, 0.0]  # φ = 0: exactly nothing


def test_element_resolved_sums_are_the_loop():
    species = torch.tensor([1, 0, 1, 2])
    edge_index = torch.tensor([[0, 0, 1, 2, 3, 3], [1, 2, 0, 3, 0, 1]])
    values = torch.arange(12, dtype=torch.float64).view(6, 2)
    out = element_resolved_sums(species, edge_index, values, 3)  # [N, S·R]
    expected = torch.zeros(4, 3, 2, dtype=torch.float64)
    for e in range(6):
        i, j = int(edge_index[0, e]), int(edge_index[1, e])
        expected[i, int(species[j])] += values[e]
    assert out.tolist() == expected.view(4, 6).tolist()


def test_log_densities_are_the_formula():
    torch.manual_seed(3)
    num_species, d, out_features, n_avg = 2, 3, 4, 5.0
    module = LogDensities(num_species, d, out_features, n_avg).double()
    species = torch.tensor([0, 1, 1])
    edge_index = torch.tensor([[0, 0, 1, 2], [1, 2, 0, 0]])
    length = torch.tensor([2.1, 2.9, 2.1, 2.9], dtype=torch.float64)
    envelope = torch.tensor([0.8, 0.3, 0.8, 0.3], dtype=torch.float64)
    u = module.densities(species, edge_index, length, envelope)
    assert module.log_rates.tolist() == list(LOG_RATES)
    for i in range(3):
        sums = torch.zeros(num_species, len(LOG_RATES), dtype=torch.float64)  # [S, K]
        for e in range(4):
            if int(edge_index[0, e]) == i:
                j = int(edge_index[1, e])
                for k, rate in enumerate(LOG_RATES):
                    sums[int(species[j]), k] += float(envelope[e]) * math.exp(-rate * (float(length[e]) - LOG_CENTRE))
        sigma = sums.reshape(-1) @ torch.nn.functional.softplus(module.weights[int(species[i])]) / n_avg
        expected = torch.log1p(sigma / LOG_EPSILON) / math.log(1 / LOG_EPSILON)
        torch.testing.assert_close(u[i], expected, rtol=1e-13, atol=1e-15)
    torch.testing.assert_close(module(species, edge_index, length, envelope), module.linear(u), rtol=0, atol=0)
    alone = module.densities(torch.tensor([1]), torch.zeros((2, 0), dtype=torch.int64),
                             length[:0], envelope[:0])
    assert alone.tolist() == [[0.0] * d]  # an atom alone: u = 0
    assert sorted(name for name, _ in module.state_dict().items()) == ["linear.weight", "weights"]


def test_attention_cutoff_keeps_the_shorter_edges_and_refuses_what_is_useless():
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
    vectors = torch.tensor([[1.0, 0, 0], [0, 2.9, 0], [0, 0, 3.0], [2.0, 2.0, 2.0]], dtype=torch.float64)
    kept_index, kept_vectors = edges_within(edge_index, vectors, 3.0)
    assert kept_index.tolist() == [[0, 1], [1, 0]] and kept_vectors.tolist() == vectors[:2].tolist()
    # the indices the caller selected beforehand (the compiled calculator's) are taken as they are
    assert edge_indices_within(vectors, 3.0).tolist() == [0, 1]
    chosen = edges_within(edge_index, vectors, 3.0, keep=torch.tensor([3]))
    assert chosen[0].tolist() == [[3], [2]] and chosen[1].tolist() == [[2.0, 2.0, 2.0]]
    assert resolve_attention_cutoff(None, 4.0) is None
    assert resolve_attention_cutoff(4.0, 4.0) is None
    assert resolve_attention_cutoff(3, 4.0) == 3.0
    with pytest.raises(ValueError, match="attention_cutoff must lie in"):
        resolve_attention_cutoff(4.5, 4.0)
    require_edges_beyond_attention(4.0, 4.0, False, "x")
    require_edges_beyond_attention(3.0, 4.0, True, "x")
    with pytest.raises(ValueError, match="useful only with density=True"):
        require_edges_beyond_attention(3.0, 4.0, False, "density=True")
