"""``mlip discovery relax --batch-size``: where torch-sim cannot be installed (Python < 3.12) the option
says in one line what batching needs, before anything is loaded or written; the batched path itself is
tested in tests/integrations/test_torchsim.py (the .ci/run job for Python 3.12)."""

from __future__ import annotations

import sys

import pytest
from ase.build import bulk

from mlip.cli import main
from mlip.extras import MissingExtraError
from mlip.workflows.discovery.inputs import Material
from mlip.workflows.discovery.relax_campaign import run_discovery_relax

pytestmark = pytest.mark.skipif(sys.version_info >= (3, 12), reason="on Python >= 3.12 torch-sim serves "
                                "--batch-size (tests/integrations/test_torchsim.py)")


def test_batch_size_says_what_to_install(tmp_path, capsys):
    import ase.io

    atoms = bulk("Cu", "fcc", a=3.6, cubic=True)
    atoms.info["material_id"] = "cu"
    path = tmp_path / "initial.extxyz"
    ase.io.write(path, [atoms])
    out = tmp_path / "run"
    assert main(["discovery", "relax", str(path), "--model", "embedded-atom-emt", "--batch-size", "8",
                 "--out-dir", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "--batch-size 8" in err and "Python >= 3.12" in err and "pip install 'mlip-torch[torchsim]'" in err
    assert not out.exists()
    # the one-at-a-time path stays
    assert main(["discovery", "relax", str(path), "--model", "embedded-atom-emt", "--out-dir", str(out),
                 "--no-progress", "--fmax", "0.05"]) == 0


def test_python_api_says_the_same(tmp_path):
    with pytest.raises(MissingExtraError, match=r"Python >= 3\.12.*mlip-torch\[torchsim\]"):
        run_discovery_relax([Material("cu", bulk("Cu", "fcc", a=3.6, cubic=True))], "embedded-atom-emt",
                            tmp_path / "run", progress=False, batch_size=2)
    assert not (tmp_path / "run").exists()
