"""Model cards: measure a trained model and write its card, the numbers as JSON and the card as Markdown.

:func:`make_model_card` takes the run folder of ``mlip train`` (``best.safetensors``, ``metrics.json``) and
:class:`CardSettings`, and writes ``NAME.safetensors``, ``NAME.json`` and ``NAME.md`` (``mlip card`` on the
command line; the shipped models' cards in ``models/pretrained/`` are its output). A model trained in stages
(``init_from``) names the run folders of the earlier stages and one training command per stage; the card
lists every stage and the total training time. One module per part:

* :mod:`.measure`: test errors (float64) overall and per ``config_type``; the *card sample* (errors on
  ``generate_emt_dataset(counts, seed)``, or on a labelled file of the repository for a model of another
  reference, which the test suite checks the shipped model still reproduces); rotation behaviour; for a
  transformer with an embedded-atom term, what its network adds to the term; one MD step's speed (float32)
  on two cells; training throughput and the stages.
* :mod:`.quotes`: the benchmark reports a card quotes: crystal properties against DFT with the targets
  (``benchmarks/accuracy/dft_validation.py``), MACE trained on the same data for the same minutes
  (``benchmarks/accuracy/mace_baseline.py``), a distilled student against its teacher
  (``benchmarks/accuracy/student_vs_teacher.py``); the miniature Matbench Discovery's metrics.
  The error budget: the label noise of the data's first version against its second
  (``examples/datasets/sige-pbe/v2/noise.py --json``) and the residual of the k-point rule of the labels
  (``benchmarks/data/kpoint_convergence.py report``), beside the test errors per ``config_type``.
* :mod:`.curve`: the learning curve over every stage (validation MAE per epoch against the minutes of all
  stages), where and why the training stopped, and its plot ``NAME-learning-curve.png``.
* :mod:`.markdown`: the card as Markdown, from the JSON (:func:`format_model_card`).
* :mod:`.make`: the settings and :func:`make_model_card`.

A Platonic Transformer may be shipped with its group turned to the ``generic`` orientation
(``orientation``) or averaged over its cosets in a larger group (``average_over``): the card records it,
and every number is measured as shipped.
"""

from mlip.workflows.model_card.make import CardSettings, make_model_card
from mlip.workflows.model_card.markdown import format_model_card
from mlip.workflows.model_card.measure import md_cells, speed_structures
from mlip.workflows.model_card.quotes import property_scalars

__all__ = ["CardSettings", "format_model_card", "make_model_card", "md_cells", "property_scalars",
           "speed_structures"]
