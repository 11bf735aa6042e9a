"""Active learning: spend the oracle's (first-principles) time only where the model is unsure.

:func:`learn` trains a committee of models on an initial dataset, explores from seed structures with the
committee (MD over a temperature schedule, relaxations, strained and rattled seeds), selects the frames
whose force uncertainty is highest (kept apart from each other), labels them with any ASE calculator
through :mod:`mlip.workflows.labelling`, retrains the committee from its previous weights, evaluates it on
a held-out file, and repeats until the label budget is spent or the exploration stays below an
uncertainty threshold. ``mlip learn`` is its command line; ``docs/active-learning.md`` the walk-through.

Modules: :mod:`.settings` (what a run is told), :mod:`.committee` (training the members),
:mod:`.explore` (candidates), :mod:`.select` (which to label), :mod:`.quality` (how good the uncertainty
is), :mod:`.loop` (the stages, the folder and resuming).
"""

from mlip.workflows.active_learning.loop import LearnResult, learn
from mlip.workflows.active_learning.quality import committee_errors, rank_correlation
from mlip.workflows.active_learning.settings import ExploreSettings, LearnSettings

__all__ = ["ExploreSettings", "LearnResult", "LearnSettings", "committee_errors", "learn", "rank_correlation"]
