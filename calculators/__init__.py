"""ASE calculators: one potential (:class:`MLIPCalculator`), or a committee of them with its spread as
uncertainty (:class:`CommitteeCalculator`); :mod:`mlip.calculators.model_loading` turns a model's name,
checkpoint or ``module:Class`` into one."""

from .committee import CommitteeCalculator
from .mlip_calculator import MLIPCalculator
from .model_loading import load_calculator

__all__ = ["CommitteeCalculator", "MLIPCalculator", "load_calculator"]
