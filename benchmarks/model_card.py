"""Measure a trained model and write its model card: ``mlip card`` (:mod:`mlip.workflows.model_card`).

    python benchmarks/model_card.py RUN_DIR --name platonic-emt --test emt-test.xyz \
        --train-command "mlip train benchmarks/configs/platonic_emt_stage1.yaml" --out models/pretrained

The shipped cards name this script, and ``examples/datasets/sige-pbe/models.sh`` runs it: it takes the
options of ``mlip card`` (``mlip card --help``) and, as it always did, replaces the card's files in ``--out``.
"""

import sys

from mlip.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["card", *sys.argv[1:], "--overwrite"]))
