"""MkDocs hooks (mkdocs.yml ``hooks``): the package's source laid out for mkdocstrings, and links that leave docs/.

* Source tree. pyproject.toml maps the top-level folders models/, calculators/ and kernels/ to ``mlip.models``,
  ``mlip.calculators`` and ``mlip.kernels`` (``[tool.setuptools.package-dir]``). Griffe, which reads the
  docstrings for mkdocstrings without importing the package, finds a module by its folder, so before each
  build the Python files are copied into ``build/docs-api-src/`` laid out as the import names are (the mapped
  folders inside ``mlip/``); mkdocs.yml points mkdocstrings at that folder.
* Links. A page of docs/ links to files outside it with relative paths (``../models/pretrained/NAME.md``), so
  that it reads on GitHub as plain Markdown; in the built site those files are not pages, so such a link is
  turned into the file's address in the repository (``repo_url``). Links between pages stay relative and are
  checked by the strict build.
"""

from __future__ import annotations

import posixpath
import re
import shutil
import tomllib
from pathlib import Path

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "docs-api-src"
#: a Markdown link's target: ``](target)`` or ``](target#anchor)``
LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


def _python_files_only(folder: str, names: list) -> list:
    """``shutil.copytree``'s ignore: everything but Python files and folders (no caches, no weights)."""
    return [n for n in names if n == "__pycache__" or not (n.endswith(".py") or (Path(folder) / n).is_dir())]


@event_priority(100)  # before mkdocstrings' handler looks for the folder
def on_config(config):
    """Lay the source tree out anew (a file deleted from the sources must not stay documented)."""
    package_dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    shutil.rmtree(TREE, ignore_errors=True)
    for name, folder in sorted(package_dirs.items()):  # "mlip" first, then its mapped subpackages
        shutil.copytree(ROOT / folder, TREE.joinpath(*name.split(".")), ignore=_python_files_only)
    return config


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Links from a page to a file outside docs/ become the file's address under ``repo_url``."""
    page_dir = posixpath.dirname(page.file.src_uri)

    def outside(match):
        target = match.group(1)
        if re.match(r"[a-z]+:", target):  # already an address (https:, mailto:)
            return match.group(0)
        path = posixpath.normpath(posixpath.join("docs", page_dir, target))
        if path.startswith("docs/"):
            return match.group(0)
        return f"]({config['repo_url'].rstrip('/')}/blob/main/{path}{match.group(2) or ''})"

    return LINK.sub(outside, markdown)
