"""Generate mutmut's mutants without running a test, and print what the named ones change.

A mutant's name is its module, its function and its number within the function, so code that moves
or changes renames its mutants; the keys of ``EQUIVALENT`` in ``scripts/mutation_score.py`` must
follow (see docs/contributing.md). Generating takes a minute or two; no test runs.

Usage (from the repository root, with the ``mutation`` extra installed)::

    python scripts/mutant_diffs.py --equivalent                     # every EQUIVALENT key's diff
    python scripts/mutant_diffs.py empirical.measure.pipeline.x_prepare__mutmut_   # names starting so

With ``--equivalent`` the exit code is 1 if a key names no mutant of the code as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = ["generate", "main"]


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """mutmut prints every file it copies, also from its worker processes: file descriptor 1 goes
    to stderr for a while, so stdout holds only the diffs."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def generate() -> dict[str, Path]:
    """Every mutant's name and its source file, after writing the mutants to ``mutants/``.

    The steps of ``mutmut run`` before it starts any test (mutmut 3.8).
    """
    import mutmut.__main__ as mutmut

    with _stdout_to_stderr():
        mutmut.set_mutant_under_test("mutant_generation")
        Path("mutants").mkdir(exist_ok=True)
        mutmut.copy_src_dir()
        mutmut.copy_also_copy_files()
        mutmut.setup_source_paths()
        mutmut.create_mutants(1)
    names = {}
    for meta in Path("mutants").rglob("*.py.meta"):
        source = Path(str(meta.relative_to("mutants")).removesuffix(".meta"))
        for name in json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]:
            names[name] = source
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prefixes", nargs="*", metavar="PREFIX", help="print the mutants whose names "
                        "start with PREFIX")
    parser.add_argument("--equivalent", action="store_true",
                        help="print every key of EQUIVALENT (scripts/mutation_score.py) with its reason")
    args = parser.parse_args(argv)
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    names = generate()
    wanted: dict[str, str] = {name: "" for name in sorted(names) if args.prefixes
                              and name.startswith(tuple(args.prefixes))}
    if args.prefixes and not wanted:
        print(f"no mutant's name starts with {' or '.join(args.prefixes)}", file=sys.stderr)
        return 1
    if args.equivalent:
        sys.path.insert(0, str(Path(__file__).parent))
        from mutation_score import EQUIVALENT

        wanted.update(EQUIVALENT)
    missing = [name for name in wanted if name not in names]
    for name, reason in wanted.items():
        print(f"# {name}" + (f"\n# equivalent: {reason}" if reason else ""))
        print("MISSING: no such mutant in the code as it is\n" if name in missing
              else get_diff_for_mutant(name, path=names[name]))
    if missing:
        print(f"{len(missing)} names without a mutant: {', '.join(missing)}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
