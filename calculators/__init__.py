"""ASE calculators: one potential (:class:`MLIPCalculator`), or a committee of them with its spread as
uncertainty (:class:`CommitteeCalculator`)."""

from .committee import CommitteeCalculator
from .mlip_calculator import MLIPCalculator, load_calculator

__all__ = ["CommitteeCalculator", "MLIPCalculator", "load_calculator"]
