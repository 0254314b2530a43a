"""Print the mutation score of each mutated module, from the results ``mutmut run`` left in ``mutants/``.

Usage (from the repository root, after ``mutmut run``; see docs/contributing.md)::

    python scripts/mutation_score.py                      # one row per module
    python scripts/mutation_score.py --survivors          # and every surviving mutant's name
    python scripts/mutation_score.py --fail-under 90      # exit 1 if a checked module scores below

A mutant counts as killed when a test failed with it in place; timeouts are shown apart and not
counted as kills. Mutants listed in
``EQUIVALENT`` change no behaviour; they are excluded from the score and printed with the reason.
Modules none of whose mutants were run yet are shown as unchecked, not as 0%.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

__all__ = ["EQUIVALENT", "main", "module_scores"]

# Exit codes as mutmut 3 records them in mutants/<path>.meta. A timeout is not counted as a kill:
# on a loaded machine a surviving mutant whose covering tests are slow times out too.
_KILLED = {1, 3, 37}
_TIMEOUT = {24, -24, 36, 152, 255}
_SURVIVED = {0}
_NO_TESTS = {5, 33}

EQUIVALENT: dict[str, str] = {
    # mutant name → why it cannot change behaviour. Keep each reason specific.
    "empirical.scaling.x_check_scale__mutmut_6":
        "`value > 0` → `value >= 0` after math.isinf(value): an infinite value is never 0",
    "empirical.scaling.x_check_scale__mutmut_7":
        "`value > 0` → `value > 1` after math.isinf(value): +inf exceeds both, -inf neither",
    "homogeneity.rules.normalization.x__affine__mutmut_2":
        "the weight branch taken for weight=None too: product with None (a degree-0 constant) "
        "keeps value and grade, and _affine rewrites the reason",
    "homogeneity.rules.normalization.x__affine__mutmut_7":
        "changes the `what` label of the γ product; _affine replaces every case's reason afterwards",
    "homogeneity.rules.normalization.x__affine__mutmut_10":
        "changes the `what` label of the γ product; _affine replaces every case's reason afterwards",
    "homogeneity.rules.normalization.x__affine__mutmut_11":
        "changes the `what` label of the γ product; _affine replaces every case's reason afterwards",
    "homogeneity.rules.normalization.x__affine__mutmut_12":
        "changes the `what` label of the γ product; _affine replaces every case's reason afterwards",
    "homogeneity.rules.normalization.x__affine__mutmut_19":
        "changes the `what` label of the β sum; _affine replaces every case's reason afterwards",
    "homogeneity.rules.normalization.x__affine__mutmut_22":
        "changes the `what` label of the β sum; _affine replaces every case's reason afterwards",
    "homogeneity.rules.normalization.x__affine__mutmut_23":
        "changes the `what` label of the β sum; _affine replaces every case's reason afterwards",
    "homogeneity.rules.normalization.x__affine__mutmut_24":
        "changes the `what` label of the β sum; _affine replaces every case's reason afterwards",
    "empirical.batching.x__decoder_start_id__mutmut_11":
        "getattr(model, 'config', None) → getattr(model, 'config'): only called for models whose "
        "config says is_encoder_decoder, so the config exists",
    "empirical.scaling.x_call_scaled__mutmut_4":
        "functional_call(args=()) → args=None: None is functional_call's own default for no "
        "positional arguments",
    "empirical.scaling.x_call_scaled__mutmut_6":
        "functional_call(strict=False) → strict=None: torch only tests `if strict:`",
    "empirical.scaling.x_call_scaled__mutmut_9":
        "args=() dropped: functional_call's default (None) means no positional arguments",
    "empirical.scaling.x_call_scaled__mutmut_11":
        "strict=False dropped: functional_call's default is strict=False",
    "homogeneity.degree.x__covers_everything__mutmut_2":
        "`return True` → `return False` for a condition that is already `true`: _build then returns "
        "the same single case unchanged instead of a copy with condition `true`, an equal Degree",
}


def _status(name: str, code: int | None) -> str:
    if name in EQUIVALENT:
        return "equivalent"
    if code is None:
        return "not checked"
    if code in _KILLED:
        return "killed"
    if code in _TIMEOUT:
        return "timeout"
    if code in _SURVIVED:
        return "survived"
    if code in _NO_TESTS:
        return "no tests"
    return "suspicious"


def module_scores(root: Path) -> dict[str, tuple[Counter[str], list[str]]]:
    """Per module (its path below ``root``): counts by status and the surviving mutants' names."""
    scores: dict[str, tuple[Counter[str], list[str]]] = {}
    for meta in sorted(root.rglob("*.py.meta")):
        codes: dict[str, int | None] = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        if not codes:
            continue
        counts: Counter[str] = Counter()
        survivors = []
        for name, code in codes.items():
            status = _status(name, code)
            counts[status] += 1
            if status in ("survived", "no tests", "suspicious", "timeout"):
                survivors.append(name)
        scores[str(meta.relative_to(root).with_suffix(""))] = (counts, sorted(survivors))
    return scores


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=Path, default=Path("mutants"),
                        help="the directory mutmut run writes (default: mutants)")
    parser.add_argument("--survivors", action="store_true", help="list every surviving mutant")
    parser.add_argument("--fail-under", type=float, default=None,
                        help="exit with status 1 if a checked module scores below this percentage")
    args = parser.parse_args(argv)
    scores = module_scores(args.mutants)
    if not scores:
        print(f"no mutmut results under {args.mutants}/; run `mutmut run` first", file=sys.stderr)
        return 2
    header = f"{'module':<36} {'score':>7} {'killed':>7} {'survived':>9} {'no tests':>9} " \
             f"{'timeout':>8} {'equiv.':>7} {'unchecked':>10}"
    print(header)
    failing = []
    for module, (counts, _) in scores.items():
        checked = sum(counts[s] for s in ("killed", "survived", "no tests", "suspicious", "timeout"))
        score = 100.0 * counts["killed"] / checked if checked else None
        shown = f"{score:6.1f}%" if score is not None else "      -"
        print(f"{module:<36} {shown:>7} {counts['killed']:>7} {counts['survived']:>9} "
              f"{counts['no tests']:>9} {counts['timeout']:>8} {counts['equivalent']:>7} "
              f"{counts['not checked']:>10}")
        if score is not None and args.fail_under is not None and score < args.fail_under:
            failing.append(module)
    if args.survivors:
        for _, survivors in scores.values():
            for name in survivors:
                print(f"not killed  {name}")
    for name, reason in sorted(EQUIVALENT.items()):
        print(f"equivalent  {name}: {reason}")
    if failing:
        print(f"below {args.fail_under:g}%: {', '.join(failing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
