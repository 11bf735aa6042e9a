"""Energy terms a potential declares beside its network (``terms=`` of :func:`mlip.models.create_model`,
``terms:`` of a model config), by name or import path, as nequip declares its pair potentials.

A term is a module called as ``term(species, edge_index, edge_vectors)`` (species [N] indices into the
potential's species, edge_index [2, E] (i ← j), edge_vectors [E, 3]) → per-atom energies [N]. A learned
term (``scaled``) is added to the network's output before the output scale; a physical one (eV) after
the scale and the reference energies, as the ZBL repulsion is. Built in (:data:`TERMS`):

* ``embedded_atom`` (learned): :class:`mlip.nn.EmbeddedAtomEnergy`, a learned function of each atom's
  element and its element-resolved neighbour densities, over every edge of the graph (to the cutoff);
* ``zbl``: the screened nuclear repulsion of :mod:`mlip.repulsion` (``inner``, ``outer``), for a model
  declared with ``repulsion: none`` (the ``repulsion`` setting declares the same term);
* ``lennard_jones`` (``epsilon``, ``sigma``) and ``buckingham`` (``a``, ``rho``, ``c``): pair potentials
  switched off smoothly at ``r_max`` (:mod:`mlip.terms.pair`), parameters per element or per pair.

Any other term is the import path ``package.module:Class`` of a subclass of :class:`EnergyTerm`, written
outside the package; it receives the potential's atomic numbers, number of species and cutoff when its
``__init__`` names them (:class:`EnergyTerm`). In a model config::

    terms:
      embedded_atom: {log_densities: true}
      lennard_jones: {epsilon: {Cu: 0.40, Au: 0.44}, sigma: {Cu: 2.34, Au: 2.63, Cu-Au: 2.5}}
      my_package.pair:Morse: {depth: 0.3, width: 1.4, r0: 2.5}

A checkpoint stores the full declaration (:func:`term_specs`: every argument, defaults filled in) in its
JSON header and each term's weights under ``terms.<name>.`` (an import path's dots as underscores);
loading it imports the module of an import path, which must be installed (never code from the file),
and builds only a subclass of :class:`EnergyTerm`.
"""

from mlip.terms.base import EnergyTerm
from mlip.terms.pair import Buckingham, LennardJones, PairTerm
from mlip.terms.registry import TERMS, build_terms, scaled, term_class, term_defaults, term_specs

__all__ = ["Buckingham", "EnergyTerm", "LennardJones", "PairTerm", "TERMS", "build_terms", "scaled",
           "term_class", "term_defaults", "term_specs"]
