"""Run every mutant of some modules against chosen test files, one forked process per mutant.

``mutmut run`` runs, for each mutant, every selected test that reaches the mutated function: the
tests of Hugging Face models and training runs too, for a function they happen to call. A module
whose own test files are fast is screened in a fraction of that time by running only those files:
one run records which tests call which mutated function, then each mutant runs, in a process forked
after a single collection, the given tests that call its function, up to the first failure (the
tests that killed earlier mutants of the same function first: most of a function's mutants fall to
the same few tests, so a kill is usually decided by the first test run). A
mutant counts as killed when one of them fails with it in place (the same switch mutmut uses, the
``MUTANT_UNDER_TEST`` variable read by its trampolines); a survivor here may still be killed by
another file, so the score is a lower bound of the suite's. Verdicts are written into
``mutants/<module>.py.meta`` with mutmut's exit codes, so ``scripts/mutation_score.py`` scores them
and ``mutmut run NAME`` can rerun a survivor with its full test selection.

Usage (from the repository root, after ``mutmut run`` or ``scripts/mutant_diffs.py`` generated
``mutants/``; see docs/contributing.md)::

    python scripts/mutation_screen.py saturated.terms -t tests/saturated/test_sat_terms.py
    python scripts/mutation_screen.py "saturated.terms.x_bilinear*" --rerun \
        -t tests/saturated/test_sat_terms.py
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "run_one"]

_KILLED, _SURVIVED, _TIMEOUT, _NO_TESTS = 1, 0, 24, 33  # mutmut's codes (scripts/mutation_score.py)
_WORDS = {_KILLED: "killed", _SURVIVED: "survived", _TIMEOUT: "timeout", _NO_TESTS: "no tests"}


def _enter_child(mutant: str) -> None:
    """Set up a forked test run: the mutant switched on, output silenced, and SIGINT handled as in
    a terminal (a screen started in the background inherits an ignored SIGINT, which the tests of
    interrupted runs, and the runs they start, would keep)."""
    os.environ["MUTANT_UNDER_TEST"] = mutant
    signal.signal(signal.SIGINT, signal.default_int_handler)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)


class _FirstFailure:
    """pytest plugin of a forked run: writes the id of the first failing test to a pipe."""

    def __init__(self, write: int) -> None:
        self._write = write

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.failed and self._write >= 0:
            os.write(self._write, report.nodeid.encode())
            os.close(self._write)
            self._write = -1


def run_one(name: str, tests: Sequence[str], timeout: float) -> tuple[int, float, str | None]:
    """The verdict on mutant ``name`` (empty: none) from a forked pytest run of ``tests`` with
    ``-x``, its wall time, and the test that failed first (None if none did). The fork keeps
    whatever a mutant changed (caches, globals) out of the next mutant's run."""
    import pytest

    start = time.monotonic()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run the tests with the mutant switched on, quietly
        os.close(read)
        _enter_child(name)
        # --tb=no: the output is thrown away, and formatting a traceback through sympy's or
        # mpmath's frames can take longer than the tests.
        code = pytest.main(["-x", "-q", "--tb=no", "-n", "0", "-p", "no:cacheprovider", "-m",
                            "not slow", "-W", "ignore", "--rootdir", ".", *tests],
                           plugins=[_FirstFailure(write)])
        os._exit(int(code))
    os.close(write)
    deadline = start + timeout
    code = _TIMEOUT
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            # pytest's exit code: 0 all passed, 1 a test failed (killed); any other (a usage
            # error, no test found) is kept as it is and scored as neither.
            code = os.waitstatus_to_exitcode(status)
            break
        time.sleep(0.02)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    # Not a blocking read: a process the tests started may still hold the pipe open, while the
    # child wrote its one id before it exited.
    os.set_blocking(read, False)
    try:
        first = os.read(read, 1 << 16).decode()
    except BlockingIOError:
        first = ""
    os.close(read)
    return code, time.monotonic() - start, first or None


def _killers_first(tests: list[str], killers: list[str]) -> list[str]:
    """``tests`` with the ones that killed earlier mutants (most recent first) moved to the front.
    Node ids from a forked run are relative to the rootdir, the given ones absolute: match by the
    part after the file."""
    rank = {killer.partition("::")[2]: index for index, killer in enumerate(reversed(killers))}
    return sorted(tests, key=lambda test: rank.get(test.partition("::")[2], len(rank)))


class _Hits:
    """pytest plugin: which mutated functions each test calls (mutmut's trampolines record a call
    while ``MUTANT_UNDER_TEST`` is ``stats``)."""

    def __init__(self) -> None:
        self.by_test: dict[str, tuple[float, list[str]]] = {}
        self._start = 0.0

    def pytest_runtest_setup(self) -> None:
        self._start = time.monotonic()

    def pytest_runtest_teardown(self, item: Any) -> None:
        from mutmut.stats import state

        # The file's absolute path: node ids are relative to the rootdir (mutants/), which the
        # test files given lie outside of, so pytest would not find them again by those ids.
        test = f"{item.path}::{item.nodeid.partition('::')[2]}"
        self.by_test[test] = (time.monotonic() - self._start, sorted(state()._stats))
        state()._stats.clear()


def tests_by_function(tests: Sequence[str]) -> dict[str, list[str]]:
    """For each mutated function (mutmut's mangled name), the test ids that call it, fastest first
    (a mutant is usually killed by several; the fast one tells soonest), from one forked run of
    ``tests``."""
    import pytest

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        _enter_child("stats")
        hits = _Hits()
        pytest.main(["-q", "-n", "0", "-p", "no:cacheprovider", "-m", "not slow", "-W", "ignore",
                     "--rootdir", ".", *tests], plugins=[hits])
        with os.fdopen(write, "w") as out:
            json.dump(hits.by_test, out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as incoming:
        by_test: dict[str, tuple[float, list[str]]] = json.load(incoming)
    os.waitpid(pid, 0)
    by_function: dict[str, list[str]] = {}
    for test, (_, functions) in sorted(by_test.items(), key=lambda item: item[1][0]):
        for function in functions:
            by_function.setdefault(function, []).append(test)
    return by_function


def _meta_path(mutants: Path, module: str) -> Path:
    """The .meta file of a module, a package's ``__init__`` included."""
    plain = mutants / (module.replace(".", "/") + ".py.meta")
    package = mutants / module.replace(".", "/") / "__init__.py.meta"
    return package if not plain.exists() and package.exists() else plain


def _module_of(pattern: str, mutants: Path) -> str:
    """The module a name pattern belongs to: the longest dotted prefix with a .meta file."""
    parts = pattern.split(".")
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        if _meta_path(mutants, module).exists():
            return module
    raise SystemExit(f"no generated mutants for {pattern!r} under {mutants}/; run `mutmut run` first")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("patterns", nargs="+",
                        help="modules (saturated.terms) or mutant name patterns (saturated.terms.x_make*)")
    parser.add_argument("-t", "--tests", nargs="+", action="extend", required=True,
                        help="test files or node ids, relative to the repository root (-t a b or -t a -t b)")
    parser.add_argument("--mutants", type=Path, default=Path("mutants"))
    parser.add_argument("--rerun", action="store_true", help="also rerun mutants with a verdict")
    parser.add_argument("--timeout-factor", type=float, default=10.0,
                        help="a mutant times out after this many times the clean run (default 10)")
    args = parser.parse_args(argv)

    mutants = args.mutants.resolve()
    # The test files as they are now (mutmut's own copies under mutants/ lag behind edits).
    tests = [str(Path(path).resolve()) + (f"::{rest}" if rest else "")
             for path, _, rest in (test.partition("::") for test in args.tests)]
    by_module: dict[str, list[str]] = {}
    for pattern in args.patterns:
        module = _module_of(pattern, mutants)
        names = json.loads(_meta_path(mutants, module).read_text(encoding="utf-8"))["exit_code_by_key"]
        wanted = pattern if any(ch in pattern for ch in "*?[") or pattern != module else f"{module}.*"
        by_module.setdefault(module, []).extend(n for n in names if fnmatch.fnmatchcase(n, wanted))

    os.chdir(mutants)  # the mutated tree comes first on the path, as under mutmut
    sys.path.insert(0, str(mutants))
    import pytest

    # Collect once here, so every forked run finds torch, the package and the tests imported.
    if pytest.main(["--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider", "--rootdir", ".", *tests]):
        print("the tests cannot be collected", file=sys.stderr)
        return 2
    code, clean, _ = run_one("", tests, timeout=3600)
    if code != _SURVIVED:
        print("the tests fail without any mutant: fix them first", file=sys.stderr)
        return 2
    timeout = args.timeout_factor * clean + 10
    from mutmut.utils.format_utils import mangled_name_from_mutant_name

    # Each mutant runs only the tests that call its function, as under mutmut.
    covering = tests_by_function(tests)
    print(f"clean run {clean:.1f} s; each mutant may take {timeout:.0f} s", flush=True)

    tally: Counter[str] = Counter()
    killers: dict[str, list[str]] = {}  # per function, the tests that killed its mutants
    for module, names in by_module.items():
        meta_path = _meta_path(mutants, module)
        for number, name in enumerate(sorted(set(names)), 1):
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if meta["exit_code_by_key"].get(name) is not None and not args.rerun:
                continue
            function = mangled_name_from_mutant_name(name)
            reaching = _killers_first(covering.get(function, []), killers.get(function, []))
            verdict, seconds, failed = (run_one(name, reaching, timeout) if reaching
                                        else (_NO_TESTS, 0.0, None))
            if verdict == _KILLED and failed is not None:
                known = killers.setdefault(function, [])
                if failed in known:
                    known.remove(failed)
                known.append(failed)
            meta["exit_code_by_key"][name] = verdict
            meta_path.write_text(json.dumps(meta, indent=2), encoding="utf-8")
            word = _WORDS.get(verdict, f"pytest exit code {verdict}")
            tally[word] += 1
            print(f"[{number}/{len(names)}] {name}: {word} ({seconds:.1f} s)", flush=True)
    print(", ".join(f"{count} {word}" for word, count in sorted(tally.items())) or "nothing to run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
