"""Building blocks of the energy models, one concept per module: edge lengths, the cutoff envelope,
radial bases, scatter sums, the envelope-weighted softmax, the attention cutoff, element-resolved
neighbor sums, logarithmic neighbor densities and the embedded-atom energy term."""

from mlip.nn.attention_cutoff import (edge_indices_within, edges_within, require_edges_beyond_attention,
                                     resolve_attention_cutoff)
from mlip.nn.edge_length import safe_length
from mlip.nn.embedded_atom import EmbeddedAtomEnergy
from mlip.nn.envelope import PolynomialEnvelope
from mlip.nn.envelope_softmax import envelope_exp
from mlip.nn.log_densities import LOG_CENTRE, LOG_EPSILON, LOG_RATES, LogDensities, log_densities
from mlip.nn.neighbor_sums import element_resolved_sums
from mlip.nn.radial_basis import BesselBasis, GaussianBasis
from mlip.nn.scatter import scatter_max, scatter_sum

__all__ = [
    "BesselBasis",
    "EmbeddedAtomEnergy",
    "GaussianBasis",
    "LOG_CENTRE",
    "LOG_EPSILON",
    "LOG_RATES",
    "LogDensities",
    "PolynomialEnvelope",
    "edge_indices_within",
    "edges_within",
    "element_resolved_sums",
    "envelope_exp",
    "log_densities",
    "require_edges_beyond_attention",
    "resolve_attention_cutoff",
    "safe_length",
    "scatter_max",
    "scatter_sum",
]
