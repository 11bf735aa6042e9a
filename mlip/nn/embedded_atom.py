"""An embedded-atom energy term: a learned function of each atom's element-resolved neighbor densities."""

from __future__ import annotations

import torch
from torch import nn

from mlip.nn.edge_length import safe_length
from mlip.nn.envelope import PolynomialEnvelope
from mlip.nn.log_densities import LogDensities
from mlip.nn.neighbor_sums import element_resolved_sums
from mlip.nn.radial_basis import BesselBasis


class EmbeddedAtomEnergy(nn.Module):
    """E_i = MLP(SiLU(A ρ_i + e(Z_i))), with D learned densities per atom

        ρ_i = W_{Z_i} · vec(Σ_{j≠i} onehot(Z_j) ⊗ φ(r_ij) B(r_ij)) / n_avg        [N, D]

    B a Bessel basis [R] times the cutoff envelope φ, W_{Z_i} a [S·R, D] matrix per centre element.
    This is the embedded-atom (Finnis–Sinclair) form: a pair-resolved radial sum per atom, embedded
    by a nonlinear function of the centre's element. Metals' energies depend first of all on such
    densities (EAM; ASE's EMT is exactly a function of two of them per atom), which a transformer
    otherwise has to learn through attention, which normalises over the neighbors. The term is
    invariant under every rotation, translation and permutation, C² at the cutoff through φ, and a sum
    over atoms, so adding it to a model keeps all of the model's symmetries. An atom without neighbors
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

    #: a learned term: the potential adds it to the network's output, inside the scale (:mod:`mlip.terms`)
    scaled = True

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
            #: the logarithmic densities and their map to the MLP's input
            self.log_density = LogDensities(self.num_species, int(num_densities), int(hidden), self.avg_neighbors)
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

    def forward(self, species: torch.Tensor, edge_index: torch.Tensor, edge_vectors: torch.Tensor) -> torch.Tensor:
        """species [N], edge_index [2, E], edge_vectors [E, 3] → per-atom energies [N]."""
        length = safe_length((edge_vectors * edge_vectors).sum(-1))
        envelope = self.envelope(length)
        rho = self._densities(species, edge_index, length, envelope)
        h = self.density_in(rho) + self.element(species).to(rho.dtype)
        if self.log_densities:
            h = h + self.log_density(species, edge_index, length, envelope)
        return self.mlp(h).squeeze(-1)

    def extra_repr(self) -> str:
        return (f"species={self.num_species}, radial={self.num_radial}, avg_neighbors={self.avg_neighbors}, "
                f"log_densities={self.log_densities}")
