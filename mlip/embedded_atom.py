"""An embedded-atom energy term: a learned function of each atom's element-resolved neighbour densities."""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

from mlip.radial import BesselBasis, PolynomialEnvelope, safe_length


def element_resolved_sums(species: torch.Tensor, edge_index: torch.Tensor, values: torch.Tensor,
                          num_species: int) -> torch.Tensor:
    """Σ_{j≠i} onehot(Z_j) ⊗ values_ij per atom: species [N], edge_index [2, E] (i ← j, no self edges),
    values [E, R] → [N, S·R] (S = num_species; the block of element s holds the sum over neighbours of
    element s)."""
    n, r = species.shape[0], values.shape[1]
    i, j = edge_index[0], edge_index[1]
    sums = values.new_zeros((n * num_species, r))
    sums = sums.index_add(0, i * num_species + species.index_select(0, j), values)
    return sums.view(n, num_species * r)


#: ε of the logarithmic densities, and the rates η_k (Å⁻¹) and centre (Å) of their radial functions
LOG_EPSILON = 1e-4
LOG_RATES = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0)
LOG_CENTRE = 2.5


def add_log_density_parameters(module: nn.Module, num_species: int, num_densities: int, out_features: int) -> None:
    """Give ``module`` what :func:`log_densities` and a map of its output take, under the names every
    user of them shares (so their checkpoints keep these keys): the non-persistent buffer ``log_rates``
    [K] (LOG_RATES, in float64 like every derived constant, exact in float32 too; it follows the
    module's device and dtype instead of being copied to the device every forward), the raw weights
    ``log_density_weights`` V [S, S·K, D] (softplus(−1.5 ± 0.5) ≈ 0.2 makes σ of a bulk atom O(0.1–1))
    and ``log_density_in``, a bias-free D → ``out_features`` linear map."""
    module.register_buffer("log_rates", torch.tensor(LOG_RATES, dtype=torch.float64), persistent=False)
    module.log_density_weights = nn.Parameter(
        torch.randn(num_species, num_species * len(LOG_RATES), num_densities) * 0.5 - 1.5)
    module.log_density_in = nn.Linear(num_densities, out_features, bias=False)


def log_densities(species: torch.Tensor, edge_index: torch.Tensor, length: torch.Tensor, envelope: torch.Tensor,
                  rates: torch.Tensor, weights: torch.Tensor, num_species: int, avg_neighbors: float) -> torch.Tensor:
    """D positive densities per atom on a logarithmic scale → u [N, D]:

        σ_i = softplus(V_{Z_i}) · vec(Σ_{j≠i} onehot(Z_j) ⊗ φ(r_ij) g(r_ij)) / n_avg ≥ 0,
        u_i = ln(1 + σ_i / ε) / ln(1 / ε)        (ε = LOG_EPSILON; u = 0 for an atom alone, ≈ 1 in bulk),

    g_k(r) = exp(−η_k (r − LOG_CENTRE)) for the rates η_k of LOG_RATES. species [N], edge_index [2, E]
    (i ← j, no self edges), length [E] and envelope φ [E] of the edges, rates η [K] (the buffer of
    :func:`add_log_density_parameters`), weights V [S, S·K, D] (raw; softplus keeps them positive)."""
    rates = rates.to(length.dtype)
    g = torch.exp(-rates * (length.unsqueeze(-1) - LOG_CENTRE)) * envelope.unsqueeze(-1)  # [E, K]
    sums = element_resolved_sums(species, edge_index, g, num_species) / avg_neighbors  # [N, S·K]
    positive = nn.functional.softplus(weights.to(g.dtype)).index_select(0, species)  # [N, S·K, D]
    sigma = torch.bmm(sums.unsqueeze(1), positive).squeeze(1)  # [N, D], ≥ 0
    return torch.log1p(sigma / LOG_EPSILON) / math.log(1.0 / LOG_EPSILON)


class EmbeddedAtomEnergy(nn.Module):
    """E_i = MLP(SiLU(A ρ_i + e(Z_i))), with D learned densities per atom

        ρ_i = W_{Z_i} · vec(Σ_{j≠i} onehot(Z_j) ⊗ φ(r_ij) B(r_ij)) / n_avg        [N, D]

    B a Bessel basis [R] times the cutoff envelope φ, W_{Z_i} a [S·R, D] matrix per centre element.
    This is the embedded-atom (Finnis–Sinclair) form: a pair-resolved radial sum per atom, embedded
    by a nonlinear function of the centre's element. Metals' energies depend first of all on such
    densities (EAM; ASE's EMT is exactly a function of two of them per atom), which a transformer
    otherwise has to learn through attention, which normalises over the neighbours. The term is
    invariant under every rotation, translation and permutation, C² at the cutoff through φ, and a sum
    over atoms, so adding it to a model keeps all of the model's symmetries. An atom without neighbours
    gets a constant per element (absorbed by the isolated-atom reference).

    With ``log_densities`` the MLP also sees D *positive* densities on a logarithmic scale,

        σ_i = softplus(V_{Z_i}) · vec(Σ_{j≠i} onehot(Z_j) ⊗ φ(r_ij) g(r_ij)) / n_avg ≥ 0,
        u_i = ln(1 + σ_i / ε) / ln(1 / ε)        (ε = 10⁻⁴; u = 0 for an atom alone, ≈ 1 in bulk),

    g_k(r) = exp(−η_k (r − 2.5 Å)), η_k from 1 to 5 Å⁻¹. EMT's energy is a function of the logarithm of
    such an exponential density (its neutral-sphere radius) plus a power of it, which varies by
    orders of magnitude between a dimer and a bulk atom; on linear densities alone the MLP sees every
    dimer in a sliver near 0. The densities are positive, so the logarithm is steep only for nearly
    isolated atoms, and smooth (C² through φ) everywhere.

    Args:
        num_species: S, number of elements.
        cutoff: r_c (Å) of the basis and envelope.
        num_radial: R, Bessel functions.
        num_densities: D, densities per atom.
        hidden: width of the embedding MLP.
        envelope_exponent: p of the polynomial envelope.
        avg_neighbors: divides the sums to keep them O(1).
        log_densities: also feed the D logarithmic positive densities u_i to the MLP (see above).
    """

    def __init__(self, num_species: int, cutoff: float, num_radial: int = 16, num_densities: int = 16,
                 hidden: int = 64, envelope_exponent: int = 5, avg_neighbors: float = 32.0,
                 log_densities: bool = False):
        super().__init__()
        for name, value in dict(num_species=num_species, num_radial=num_radial, num_densities=num_densities,
                                hidden=hidden).items():
            if int(value) < 1:
                raise ValueError(f"{name} must be a positive integer, got {value}")
        if avg_neighbors <= 0:
            raise ValueError(f"avg_neighbors must be positive, got {avg_neighbors}")
        self.num_species, self.num_radial = int(num_species), int(num_radial)
        self.avg_neighbors = float(avg_neighbors)
        self.radial = BesselBasis(cutoff, num_radial)
        self.envelope = PolynomialEnvelope(cutoff, envelope_exponent)
        features = self.num_species * self.num_radial
        self.density_weights = nn.Parameter(torch.randn(self.num_species, features, int(num_densities)) / features**0.5)
        self.density_in = nn.Linear(int(num_densities), int(hidden))
        self.element = nn.Embedding(self.num_species, int(hidden))
        self.log_densities = bool(log_densities)
        if self.log_densities:
            add_log_density_parameters(self, self.num_species, int(num_densities), int(hidden))
        self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def densities(self, species: torch.Tensor, edge_index: torch.Tensor, edge_vectors: torch.Tensor) -> torch.Tensor:
        """species [N], edge_index [2, E] (i ← j, no self edges), edge_vectors [E, 3] → ρ [N, D]."""
        length = safe_length((edge_vectors * edge_vectors).sum(-1))
        return self._densities(species, edge_index, length, self.envelope(length))

    def _densities(self, species, edge_index, length, envelope) -> torch.Tensor:
        """ρ [N, D] from the edge lengths [E] and their envelope φ [E]."""
        basis = self.radial(length) * envelope.unsqueeze(-1)  # [E, R]
        sums = element_resolved_sums(species, edge_index, basis, self.num_species) / self.avg_neighbors  # [N, S·R]
        weights = self.density_weights.to(basis.dtype).index_select(0, species)  # [N, S·R, D]
        return torch.bmm(sums.unsqueeze(1), weights).squeeze(1)

    def _log_densities(self, species, edge_index, length, envelope) -> torch.Tensor:
        """u [N, D] (``log_densities``) from the edge lengths [E] and their envelope φ [E]."""
        return log_densities(species, edge_index, length, envelope, self.log_rates, self.log_density_weights,
                             self.num_species, self.avg_neighbors)

    def forward(self, species: torch.Tensor, edge_index: torch.Tensor, edge_vectors: torch.Tensor) -> torch.Tensor:
        """species [N], edge_index [2, E], edge_vectors [E, 3] → per-atom energies [N]."""
        length = safe_length((edge_vectors * edge_vectors).sum(-1))
        envelope = self.envelope(length)
        rho = self._densities(species, edge_index, length, envelope)
        h = self.density_in(rho) + self.element(species).to(rho.dtype)
        if self.log_densities:
            h = h + self.log_density_in(self._log_densities(species, edge_index, length, envelope))
        return self.mlp(h).squeeze(-1)

    def extra_repr(self) -> str:
        return (f"species={self.num_species}, radial={self.num_radial}, avg_neighbors={self.avg_neighbors}, "
                f"log_densities={self.log_densities}")


def transformer_term(num_species: int, cutoff: float, embedded_atom: bool,
                     log_densities: bool) -> Optional[EmbeddedAtomEnergy]:
    """The term a transformer adds with its options ``embedded_atom`` and ``embedded_atom_log_densities``
    (otherwise the defaults, which ``init_embedded_atom_from`` relies on), or ``None``; ValueError for
    log densities without the term."""
    if log_densities and not embedded_atom:
        raise ValueError("embedded_atom_log_densities needs embedded_atom: true")
    return EmbeddedAtomEnergy(num_species, cutoff, log_densities=log_densities) if embedded_atom else None
