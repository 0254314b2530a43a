"""Print the mutation score of each mutated module, from the results ``mutmut run`` left in ``mutants/``.

Usage (from the repository root, after ``mutmut run``; see docs/contributing.md)::

    python scripts/mutation_score.py                      # one row per module
    python scripts/mutation_score.py --survivors          # and every surviving mutant's name
    python scripts/mutation_score.py --fail-under 90      # exit 1 if a checked module scores below
    python scripts/mutation_score.py --sample 36 --seed 13 saturated/ties.py   # names to run

A mutant counts as killed when a test failed with it in place; timeouts are shown apart and not
counted as kills. Mutants listed in
``EQUIVALENT`` change no behaviour; they are excluded from the score and printed with the reason.
A key whose mutant a test killed is reported on stderr, with exit status 1: a change to its
function renumbered the mutants, so the key names another one now (or its reason is wrong).
Modules none of whose mutants were run yet are shown as unchecked, not as 0%.

A full run of every module takes hours on a shared machine, so a module may be measured on a
random sample of its mutants: ``--sample N --seed S`` prints N mutant names per module (every
module, or the ones named), the same names for the same seed and the same generated mutants, to
pass to ``mutmut run``. When only part of a module's mutants were checked, its score is an
estimate: the table marks it "sample" and gives a 95% Wilson interval for the score over all of
the module's mutants (treating the checked ones as a simple random sample, which they are only
if they were chosen with ``--sample``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

__all__ = ["EQUIVALENT", "exit_codes", "killed_equivalents", "main", "module_scores", "sample",
           "wilson_interval"]

# Exit codes as mutmut 3 records them in mutants/<path>.meta. A timeout is not counted as a kill:
# on a loaded machine a surviving mutant whose covering tests are slow times out too.
_KILLED = {1, 3, 37}
_TIMEOUT = {24, -24, 36, 152, 255}
_SURVIVED = {0}
_NO_TESTS = {5, 33}

EQUIVALENT: dict[str, str] = {
    # mutant name → why it cannot change behaviour. Keep each reason specific.
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
    "homogeneity.rules.routing.x__weakened__mutmut_6":
        "a degree without one also goes through Degree.of: of() gives a none grade the value nan and "
        "keeps the reason, so the case is the same",
    "empirical.models.batching.x__decoder_start_id__mutmut_11":
        "getattr(model, 'config', None) → getattr(model, 'config'): only called for models whose "
        "config says is_encoder_decoder, so the config exists",
    "empirical.measure.scaled.x_call_scaled__mutmut_4":
        "functional_call(args=()) → args=None: None is functional_call's own default for no "
        "positional arguments",
    "empirical.measure.scaled.x_call_scaled__mutmut_6":
        "functional_call(strict=False) → strict=None: torch only tests `if strict:`",
    "empirical.measure.scaled.x_call_scaled__mutmut_9":
        "args=() dropped: functional_call's default (None) means no positional arguments",
    "empirical.measure.scaled.x_call_scaled__mutmut_11":
        "strict=False dropped: functional_call's default is strict=False",
    "empirical.measure.pipeline.x_prepare__mutmut_70":
        "Corpus(texts, '') → Corpus(texts, None), built only to take .sha256, which hashes the "
        "sentences alone (the source label is not part of the fingerprint)",
    "saturated.ties.x__disagreement__mutmut_33":
        "range(2, max + 1) → range(2, max + 2): the extra member max + 1 has no position of that "
        "rank and no row has that many members, so its swap is all zeros and fn(0, values) = 0 "
        "is never > tol·0; `differs` is unchanged (one wasted pass)",
    "saturated.terms.x_power__mutmut_53":
        "the zero placeholder u of a single-part x gets degree +inf instead of -inf: _series only "
        "loops while u's degree is finite, so both give the series 1 with the same floor",
    "saturated.rules.softmax.x__hard_attention__mutmut_71":
        "column 1 instead of 0 of the row counts: count is expanded along each row, so every column "
        "holds the same count; rows of a single position never tie and do not reach this line",
    "saturated.terms.x_make__mutmut_65":
        "expand() also applied to a part that already has the broadcast shape: a view with the "
        "same values",
    "saturated.ties.x_contract__mutmut_2":
        "the internal assert weakened from `and` to `or`: the softmax rule always builds "
        "TiedWeights with both candidates and count, so it never fails either way",
    "saturated.ties.x_contract__mutmut_32":
        "the matmul fast path never taken (dim == ndim + 1 is never true): _disagreement checks the "
        "same swaps on the whole product, giving the same outputs more slowly",
    "saturated.terms.x_mul__mutmut_11":
        "bilinear(torch.mul, ..., stack_left=False): stack_left only batches the pairs of parts into "
        "one torch.mul call; without it the same elementwise products are taken pair by pair",
    "empirical.measure.pipeline.x_token_cosines__mutmut_27":
        "b.norm(dim=+1) instead of dim=-1: b is reshaped to 2-D (vectors × hidden), where "
        "dimension 1 is the last",
    "saturated.rules.softmax.x__hard_attention__mutmut_75":
        "squeeze(-2) instead of squeeze(-1) on torch.nonzero's (n, 1) result: the tied-row index "
        "keeps a unit dimension, so the gathered rows get one too, the series runs along the same "
        "last dimension and the scatter back uses the same index",
    "saturated.terms.x_may_hold_nan__mutmut_1":
        "`is_floating_point() and isnan(sum)` → `or`: for an integer tensor isnan of its sum is "
        "False, the same answer",
    "empirical.measure.pipeline.x_token_cosines__mutmut_24":
        "a.norm(dim=+1) instead of dim=-1: a is reshaped to 2-D (vectors × hidden), where "
        "dimension 1 is the last",
    "empirical.measure.pipeline.x_token_cosines__mutmut_37":
        "(a * b).sum(+1) instead of sum(-1): a and b are reshaped to 2-D (vectors × hidden), where "
        "dimension 1 is the last",
    "empirical.measure.pipeline.x_prepare__mutmut_74":
        "Corpus(texts, '') → Corpus(texts, 'XXXX'), built only to take .sha256, which hashes the "
        "sentences alone (the source label is not part of the fingerprint)",
    "empirical.measure.pipeline.x_corpus_record__mutmut_10":
        "Corpus(texts, '') → Corpus(texts, None) for the record's sha256, which hashes the "
        "sentences alone (the source label is not part of the fingerprint)",
    "empirical.measure.pipeline.x_corpus_record__mutmut_14":
        "Corpus(texts, '') → Corpus(texts, 'XXXX') for the record's sha256, which hashes the "
        "sentences alone (the source label is not part of the fingerprint)",
    "empirical.measure.similarity.xǁSimilarityResultǁfrom_dict__mutmut_39":
        "an older file's scale 'inf' no longer matched by name: float('inf') reads it as infinity "
        "all the same",
    "empirical.measure.similarity.xǁSimilarityResultǁfrom_dict__mutmut_40":
        "an older file's scale 'inf' compared with 'INF': float('inf') reads it as infinity all "
        "the same",
    "empirical.measure.similarity.x_representation_similarity__mutmut_58":
        "the model passed to forward for the scaled pass is None: it is read only to name the model "
        "in the error for a forward that rejects output_hidden_states, and the plain pass, with the "
        "same forward and the same options, runs first and raises that error",
    "empirical.measure.similarity.x_representation_similarity__mutmut_82":
        "the model passed to hidden_states for the scaled output is None: it is read only to name "
        "the model when hidden states are missing; the scaled pass (functional_call of the same "
        "forward, or its limit with the same output fields) lacks them only if the plain output, "
        "checked first, does",
    "empirical.models.batching.x__special_tokens__mutmut_12":
        "num_special_tokens_to_add(pair=None) instead of pair=False: Hugging Face tokenizers test "
        "`if pair`, so None and False ask for one sentence alike",
    "empirical.models.batching.x_position_limit__mutmut_11":
        "getattr(config, 'model_type', None) instead of '': the offsets table has neither key, so "
        "both give the offset 0",
    "empirical.models.batching.x_position_limit__mutmut_24":
        "getattr(config, 'model_type', 'XXXX') instead of '': the offsets table has neither key, so "
        "both give the offset 0",
    "empirical.models.batching.x_position_limit__mutmut_19":
        "getattr(model, 'config') without a default: position_limit has returned None before this "
        "line for a model without config (configured_positions reads the limit from the config)",
    "empirical.models.batching.x_make_batches__mutmut_28":
        "getattr(config, 'is_encoder_decoder', None) instead of False: the value goes through "
        "bool(), which is False for both",
    "empirical.models.batching.x_make_batches__mutmut_56":
        "torch.full(..., pad, dtype=None) instead of dtype=torch.long: _pad_id returns an int, and "
        "torch.full infers int64 (torch.long) from an integer fill value",
    "empirical.models.batching.x_make_batches__mutmut_59":
        "torch.full(..., pad) without dtype=torch.long: _pad_id returns an int, and torch.full "
        "infers int64 (torch.long) from an integer fill value",
    "saturated.ties.x__disagreement__mutmut_2":
        "rank = cumsum / candidates instead of cumsum * candidates: outside the tie set the quotient "
        "is inf or NaN, which equals no member number, as 0 does; inside it is the same count, "
        "exact in float32 for any row shorter than 2²⁴ positions",
    "saturated.ties.x__disagreement__mutmut_15":
        "`degree <= floor: break` → `degree < floor`: a values part exactly at the product's floor "
        "is also compared; the leading part is always above that floor, and a lower part that "
        "differs makes the floor max(floor, degree) = floor, the same",
    "saturated.ties.x__disagreement__mutmut_20":
        "the 0-dim `differs` accumulator made on the CPU instead of coef's device: a 0-dim CPU tensor "
        "combines with a tensor on any device, and the result of the first `|` is on coef's device",
    "saturated.ties.x__disagreement__mutmut_23":
        "the 0-dim `differs` accumulator made on the default device instead of coef's: a 0-dim CPU "
        "tensor combines with a tensor on any device, and the result of the first `|` is on coef's",
    "homogeneity.degree.x__add_single__mutmut_26":
        "compare() skipped (order = None): the three cases Eq(a, b), a > b and a < b are built "
        "instead; sympy evaluates each relation by the same sign test of a − b that compare uses, so "
        "where compare decides, two conditions are false and dropped and the third is true: the same "
        "single unconditional case",
    "homogeneity.degree.x__feasible__mutmut_6":
        "getattr(condition, 'free_symbols', None) instead of set(): every condition reaching "
        "_feasible is a sympy Boolean (built by sympy.And, Eq, Or or relations, or sympy.true), and "
        "every sympy object has free_symbols, so the default is never used",
    "homogeneity.degree.x__feasible__mutmut_9":
        "getattr(condition, 'free_symbols') without a default: every condition reaching _feasible "
        "is a sympy Boolean, and every sympy object has free_symbols",
    "homogeneity.degree.x_show__mutmut_1":
        "the integer shortcut of show() never taken (`and False`): it only skips sympy's "
        "printer, and str(sympy.Integer(n)) is the same text as str(n)",
    "homogeneity.degree.x_show__mutmut_5":
        "the integer shortcut of show() never taken (reads is_Integer of None): it only skips "
        "sympy's printer, and str(sympy.Integer(n)) is the same text as str(n)",
    "homogeneity.degree.x_show__mutmut_7":
        "the integer shortcut of show() with default None instead of False (both falsy): it only "
        "skips sympy's printer, and str(sympy.Integer(n)) is the same text as str(n)",
    "homogeneity.degree.x_show__mutmut_11":
        "the integer shortcut of show() never taken (reads a misspelt attribute): it only skips "
        "sympy's printer, and str(sympy.Integer(n)) is the same text as str(n)",
    "homogeneity.degree.x_show__mutmut_13":
        "the integer shortcut of show() never taken (reads IS_INTEGER): it only skips sympy's "
        "printer, and str(sympy.Integer(n)) is the same text as str(n)",
    "homogeneity.degree.xǁDegreeǁnone__mutmut_1":
        "Degree.none passes None instead of sympy.nan as the value: Degree.of replaces the value of "
        "every `none` grade by sympy.nan",
    "homogeneity.degree.xǁGradeǁweaker__mutmut_3":
        "`self.rank >= other.rank` → `>`: for equal ranks it returns `other` instead of `self`, the "
        "same enum member",
    "saturated.functional.x__check_mask__mutmut_24":
        "fits = None instead of False for a mask that does not broadcast: `if not fits` raises "
        "the same error",
    "saturated.functional.x_tie_set__mutmut_22":
        "finite = None: every row takes the general path (torch.where over allowed positions, the "
        "tolerance scaled by the largest finite allowed |score|), which gives the same sets for "
        "finite scores; the finite path is a faster form of it",
    "saturated.functional.x_tie_set__mutmut_85":
        "the upper sentinel of integer scores 2**62 → 2*62: it only fills low_side, which the "
        "general (non-finite or integer) path never reads",
    "saturated.ties.x__matmul_disagreement__mutmut_9":
        "rows with count ≥ 1 instead of > 1 also gathered: a single winner is its own first "
        "member, and a value never differs from itself (|a − a| = 0 is not > tol·2|a|; NaN and "
        "±inf compare false)",
    "saturated.ties.x__matmul_disagreement__mutmut_22":
        "argmax(+1) instead of argmax(-1) on members, always 2-D (tied rows × positions)",
    "saturated.ties.x__matmul_disagreement__mutmut_42":
        "values parts at exactly the product's floor also compared: they come last, so the "
        "others stay aligned with values.parts, and a difference there makes the floor "
        "max(floor, degree) = floor, the same",
    "saturated.ties.x__matmul_disagreement__mutmut_61":
        "undetermined.shape[+1] instead of [-1]: undetermined is 2-D (tie pairs × value columns)",
    "saturated.ties.x_contract__mutmut_10":
        "bilinear(stack_left=None) instead of the caller's stack_left: stack_left only batches the "
        "pairs of parts into one call of fn; without it the same products are taken pair by pair",
    "saturated.ties.x_contract__mutmut_15":
        "bilinear without stack_left (False) instead of the caller's: stack_left only batches the "
        "pairs of parts into one call of fn; without it the same products are taken pair by pair",
    "saturated.ties.x_contract__mutmut_26":
        "the matmul fast path not taken for any call (gatherable = None): _disagreement checks "
        "the same swaps on the whole product, giving the same outputs more slowly",
    "saturated.ties.x_contract__mutmut_28":
        "the matmul fast path not taken for 2-D values (3 <= values.dim()): _disagreement "
        "checks the same swaps on the whole product, giving the same outputs more slowly",
    "saturated.ties.x_contract__mutmut_29":
        "the matmul fast path not taken for 2-D values (2 < values.dim()): _disagreement checks "
        "the same swaps on the whole product, giving the same outputs more slowly",
    "saturated.ties.x_contract__mutmut_30":
        "the matmul fast path not taken for values with as many dimensions as the weights: "
        "_disagreement checks the same swaps on the whole product, giving the same outputs more "
        "slowly",
    "saturated.ties.x_contract__mutmut_31":
        "the matmul fast path not taken for any matmul call (dim != last: the matmul rule calls "
        "contract only for weights tied along their last dimension): _disagreement checks the "
        "same swaps on the whole product, giving the same outputs more slowly",
    "saturated.ties.x_contract__mutmut_33":
        "the matmul fast path not taken for any matmul call (dim == ndim - 2: the matmul rule "
        "calls contract only for weights tied along their last dimension): _disagreement checks "
        "the same swaps on the whole product, giving the same outputs more slowly",
    "saturated.ties.x_contract__mutmut_80":
        "computed_degrees([product], summed=None) instead of summed=False: `summed` only matters "
        "where parts of several terms meet, and here there is one term",
    "saturated.ties.x_contract__mutmut_83":
        "computed_degrees([product], summed=True) instead of summed=False: `summed` only matters "
        "where parts of several terms meet, and here there is one term",
    "saturated.functional.x_step__mutmut_7":
        "`x > 0` → `x >= 0`: step raises on any entry equal to 0 before this line, and NaN compares "
        "false both ways",
    "homogeneity.degree.x__covers_everything__mutmut_2":
        "`return True` → `return False` for a condition that is already `true`: _build then returns "
        "the same single case unchanged instead of a copy with condition `true`, an equal Degree",
    "saturated.rules.softmax.x__unexpanded__mutmut_9":
        "size >= 1: narrowing a dimension of size 1 to its first index leaves it as it is",
    "saturated.rules.softmax.x__unexpanded__mutmut_10":
        "size > 2: a broadcast dimension of size 2 stays expanded, the same values once more",
    "saturated.rules.softmax.x__unexpanded__mutmut_18":
        "narrow at index 1 instead of 0 along a stride-0 dimension: every index holds the same values",
    "saturated.rules.activations.x__relu_like__mutmut_53":
        "x.floor dropped from max(error, x.floor): error already includes x.floor",
    "saturated.rules.activations.x__relu_like__mutmut_55":
        "x.floor dropped from max(error, x.floor): error already includes x.floor",
    "saturated.rules.activations.x__leading_sign__mutmut_14":
        "the loop also rereads part 0 where its sign is 0, which leaves it 0",
    "saturated.rules.activations.x__regimes__mutmut_42":
        "`new | (found != 0)` marks as growing elements whose sign an earlier part found; parts "
        "come by decreasing degree, so that part grew and they are growing already",
    "saturated.rules.activations.x__regimes__mutmut_47":
        "the loop goes on while some sign is known instead of while some is 0: it only fills "
        "signs that are still 0, so going on changes nothing",
    "saturated.rules.activations.x__regimes__mutmut_48":
        "the loop goes on while some sign is +1 instead of while some is 0: it only fills signs "
        "that are still 0, so going on changes nothing",
    "saturated.rules.softmax.x__shared_weights__mutmut_40":
        "the vanishing parts of non-candidates are 1 instead of 0: they multiply those positions' "
        "scores exp(−∞) = 0",
    "saturated.rules.softmax.x__shared_weights__mutmut_53":
        "the scores at degree 1 instead of 0: the numerators and their row sum shift by the same "
        "degree, which the division cancels",
    "saturated.rules.softmax.x__shared_weights__mutmut_73":
        "reduce(mean=None) instead of mean=False: both are false",
    "saturated.rules.common.x_part_sign__mutmut_42":
        "the internal assert weakened from `and` to `or`: settles_exactly has checked both",
    "saturated.terms.x__power_by_lead__mutmut_4":
        "torch.full without dtype=torch.long: an integer fill value gives int64 already",
    "saturated.terms.x__power_by_lead__mutmut_8":
        "torch.full without dtype=torch.long: an integer fill value gives int64 already",
    "saturated.terms.x__power_by_lead__mutmut_44":
        "non-members get 1 in every part instead of 1 in the lead only: their expansion stays "
        "finite and is dropped by the torch.where that follows",
    "saturated.terms.x__power_by_lead__mutmut_45":
        "non-members get lead 2 instead of 1: their expansion stays finite and is dropped by the "
        "torch.where that follows",
    "saturated.terms.x__power_by_lead__mutmut_48":
        "non-members get 1 in every part instead of 1 in the lead only: their expansion stays "
        "finite and is dropped by the torch.where that follows",
    "saturated.terms.x_power__mutmut_39":
        "`a0 <= 0` instead of `a0 < 0`: leads with a zero were sent to _power_by_lead above",
    "saturated.terms.x__series__mutmut_10":
        "one / coefficient(0) instead of one * coefficient(0): coefficient(0) is 1 for the "
        "exponential and every binomial series",
    "saturated.terms.x__series__mutmut_18":
        "`or` instead of `and`: with a non-finite degree the loop runs once, and the product's "
        "degree −∞ is at or below the floor, so it breaks before adding anything",
    "saturated.terms.x__series__mutmut_22":
        "coefficient(n + 2) instead of coefficient(n + 1): no series here has a zero coefficient "
        "(power() expands only negative and fractional exponents, exp none)",
    "saturated.terms.x_mul__mutmut_5":
        "bilinear(torch.mul, ..., stack_left=None): like False, the pairs of parts are multiplied "
        "one by one instead of in one call, the same products",
    "saturated.terms.x_mul__mutmut_10":
        "bilinear(torch.mul, ...) without stack_left: like False, the pairs of parts are "
        "multiplied one by one instead of in one call, the same products",
    "homogeneity.depth.x_stack_degree__mutmut_11":
        "the reason of the start degree (\"stack input\") is never shown: the closed form's pieces "
        "begin at depth 1 and the no-closed-form error prints degrees without reasons",
    "homogeneity.depth.x_stack_degree__mutmut_13":
        "the reason of the start degree (\"stack input\") is never shown: the closed form's pieces "
        "begin at depth 1 and the no-closed-form error prints degrees without reasons",
    "homogeneity.depth.x_stack_degree__mutmut_14":
        "the reason of the start degree (\"stack input\") is never shown: the closed form's pieces "
        "begin at depth 1 and the no-closed-form error prints degrees without reasons",
    "homogeneity.depth.x_stack_degree__mutmut_15":
        "the reason of the start degree (\"stack input\") is never shown: the closed form's pieces "
        "begin at depth 1 and the no-closed-form error prints degrees without reasons",
    "homogeneity.depth.x_stack_degree__mutmut_38":
        "range(base) instead of range(1, base) adds the piece Eq(L, 0), impossible for the "
        "positive symbol L: Degree.piecewise drops it",
    "homogeneity.depth.x_block_degree_map__mutmut_18":
        "getattr's default is used only for a placeholder whose value is not a tensor; "
        "torch.export specializes int arguments into the graph, so every user-input placeholder "
        "holds a tensor (test_the_default_input_is_the_first_floating_point_one passes an int "
        "first)",
    "homogeneity.depth.x_block_degree_map__mutmut_21":
        "getattr's default is used only for a placeholder whose value is not a tensor; "
        "torch.export specializes int arguments into the graph, so every user-input placeholder "
        "holds a tensor (test_the_default_input_is_the_first_floating_point_one passes an int "
        "first)",
    "homogeneity.depth.x_block_degree_map__mutmut_27":
        "getattr's default is used only for a placeholder whose value is not a tensor; "
        "torch.export specializes int arguments into the graph, so every user-input placeholder "
        "holds a tensor (test_the_default_input_is_the_first_floating_point_one passes an int "
        "first)",
    "homogeneity.depth.x_block_degree_map__mutmut_28":
        "getattr's default is used only for a placeholder whose value is not a tensor; "
        "torch.export specializes int arguments into the graph, so every user-input placeholder "
        "holds a tensor (test_the_default_input_is_the_first_floating_point_one passes an int "
        "first)",
    "homogeneity.depth.x__closed_form__mutmut_26":
        "`or` → `and` in the affine test: when the derivative in k still contains k the value is "
        "not slope·k + shift, so the remainder test is true as well; the remainder test decides "
        "alone",
    "homogeneity.depth.x__closed_form__mutmut_34":
        "`continue` → `break` after a non-affine case whose condition holds at the start: the "
        "cases of one degree have disjoint conditions, so no later case can hold there and both "
        "return None",
    "homogeneity.depth.x__holds__mutmut_5":
        "`or` → `and`: a condition in symbols other than n (or in none) then reaches as_set, "
        "which raises for several symbols (caught: False) and gives the empty set for false; both "
        "answer False",
    "empirical.training.checkpoints.x_scan_checkpoints__mutmut_45":
        "the architecture reference is kept on the CPU instead of the meta device: only its names and "
        "shapes are read, so the scan gives the same records and errors, with more memory held",
    "empirical.training.checkpoints.x_scan_checkpoints__mutmut_47":
        "the architecture reference is kept on the CPU instead of the meta device: only its names and "
        "shapes are read, so the scan gives the same records and errors, with more memory held",
    "empirical.training.checkpoints.x_scan_checkpoints__mutmut_22":
        "the tracker starts as \"\" instead of None: the first checkpoint always replaces it "
        "(first is None there) before anything reads it",
    "saturated.terms.x_bilinear__mutmut_17":
        "`d >= floor` among the degrees that may set the floor: a degree equal to the floor sorts "
        "last, and the floor it sets is max(floor, floor), unchanged",
    "saturated.terms.x_bilinear__mutmut_31":
        "the zero returned when no pair lies above the floor is made with orders=None: its one part "
        "sits at the floor, and make drops it before it reads orders",
    "saturated.terms.x_bilinear__mutmut_35":
        "`/ 0` for `* 0` in the zero returned when no pair lies above the floor: that part sits at "
        "the floor and make keeps only its shape and dtype",
    "saturated.terms.x_bilinear__mutmut_40":
        "`* 1` for `* 0` in the zero returned when no pair lies above the floor: that part sits at "
        "the floor and make keeps only its shape and dtype",
    "saturated.terms.x_bilinear__mutmut_70":
        "computed degrees also at one order: make reads them only with orders > 1 (finite degrees), "
        "and drops an all-zero part of infinite degree either way",
    "saturated.terms.x_bilinear__mutmut_77":
        "the stacked call only from three pairs on: two pairs are multiplied one by one, the same "
        "products",
    "saturated.terms.x_bilinear__mutmut_102":
        "one matmul over the concatenated parts also for a single pair: a concatenation of one, "
        "the same product",
    "saturated.terms.x_bilinear__mutmut_103":
        "two pairs of a matmul multiplied one by one and summed instead of one matmul over the "
        "concatenated parts: the same sum in another order of float additions, and the part's "
        "rounding bound (n·pairs + pairs − 1 products) covers both orders",
    "saturated.rounding.xǁRoundingǁof_exact__mutmut_23":
        "unsqueeze(-1) → unsqueeze(+1): the partials are asked for 1-D flat positions, so the looked-up "
        "values are 1-D and both add the last dimension",
    "saturated.rounding.xǁRoundingǁscaled__mutmut_11":
        "`factor > 0` → `factor >= 0` choosing the unflipped partials: at factor 0 the partials are "
        "replaced by None anyway (`flipped if factor != 0 else None`)",
    "saturated.rounding.x__summed_exact_values__mutmut_19":
        "torch.cat(dim=-1) → dim=+1: partials are always (N, P), so dimension 1 is the last",
    "saturated.rounding.x__split__mutmut_2":
        "Veltkamp's constant 2²⁷ + 1 → 2²⁷ − 1: for a in [1, 2) (scaled by any power of two short of "
        "overflow) hi = fl(a·C) − fl(a·C − a) is a multiple of 2⁻²⁵, or of 2⁻²⁶ only as 1 + 2⁻²⁶, and "
        "|lo| ≤ 2⁻²⁶, so every product of two halves has at most 53 bits and is exact (checked on 2·10⁶ "
        "random and edge mantissas); the results differ only where a·C overflows, above 1.3·10³⁰⁰, where "
        "the split fails with either constant",
    "saturated.rounding.x__split__mutmut_6":
        "Veltkamp's constant 2²⁷ + 1 → 2²⁷ + 2: a·(C − 1) ≥ 2²⁷ for a in [1, 2), so hi is a multiple of "
        "2⁻²⁵ (26 bits) and lo = a − hi a multiple of 2⁻⁵² with |lo| ≤ 2⁻²⁶ (26 bits), as with 2²⁷ + 1: "
        "every partial product is exact (checked on 2·10⁶ random and edge mantissas); they differ only "
        "where a·C overflows, above 1.3·10³⁰⁰",
    "saturated.rounding.x__exact_products__mutmut_13":
        "torch.cat(dim=-1) → dim=+1: the operand rows are always (N, k), so dimension 1 is the last",
    "saturated.rounding.x__einsum_letters__mutmut_9":
        "the ellipsis test looks for \"XX...XX\" instead of \"...\": an ellipsis repeats '.' in the operand "
        "or output that holds it, which the repeated-letter test refuses the same way",
    "saturated.rounding.x__einsum_rows__mutmut_20":
        "index → rindex of a kept letter: _einsum_letters admits no repeated letter, so each letter "
        "occurs once",
    "saturated.rounding.x__einsum_rows__mutmut_22":
        "index → rindex of a summed letter: _einsum_letters admits no repeated letter, so each letter "
        "occurs once",
    "saturated.rounding.x__einsum_rows__mutmut_29":
        "index → rindex of an output letter: _einsum_letters admits no repeated output letter, so each "
        "occurs once",
    "saturated.rounding.x__operand_rows__mutmut_9":
        "out_shape → None passed to _einsum_rows, which does not read that argument",
    "saturated.rounding.x__operand_rows__mutmut_19":
        "unsqueeze(-1) → unsqueeze(+1) of the elementwise product's first operand: indexed by a full "
        "tuple of positions it is 1-D, so both add the last dimension",
    "saturated.rounding.x__operand_rows__mutmut_23":
        "unsqueeze(-1) → unsqueeze(+1) of the elementwise product's second operand: indexed by a full "
        "tuple of positions it is 1-D, so both add the last dimension",
    "saturated.rounding.x__operand_rows__mutmut_61":
        "`fn is linear and y.dim() == 2` → `or`: only ops _supports accepted get here, and matmul (both "
        "operands of 2+ dimensions), mul and einsum returned above, so fn is linear",
    "saturated.rounding.x__cheap_magnitude__mutmut_45":
        "norm of linear's weight over dim=-1 → dim=+1: the branch requires a 2-D weight, whose dimension "
        "1 is the last",
    "saturated.rounding.x_product_rounding__mutmut_114":
        "torch.cat(dim=-1) → dim=+1 of the pairs' partial products: each is (N, 4k), so dimension 1 is "
        "the last",
    "saturated.rounding.x_exact_maximal__mutmut_1":
        "the precondition assert's `and` → `or`: its only caller (rules.common.maximal) calls it after "
        "settles_exactly, which requires both index and partials",
    "saturated.rounding.x_exact_maximal__mutmut_23":
        "rows.sum(-1) → sum(+1): rows is 2-D, so dimension 1 is the last",
    "saturated.rounding.x_exact_maximal__mutmut_25":
        "`> 1` → `>= 1` candidates for the exact step: a row with one candidate has one member, equal to "
        "itself (`same`), so it is never narrowed",
    "saturated.rounding.x_exact_maximal__mutmut_56":
        "the shortcut `same` reduced over every member (.all(None)): either every member equals its row's"
        " first (nothing to narrow, none compared) or every tied row is compared exactly, which keeps the"
        " same members; only the work changes",
    "saturated.rounding.x_exact_maximal__mutmut_57":
        "the shortcut `same` as `!=`: the first member of each row never differs from itself, so every "
        "tied row is compared exactly, which keeps the same members; only the work changes",
    "saturated.rounding.x_exact_maximal__mutmut_58":
        "(…).all(-1) → all(+1): partials are 2-D, so dimension 1 is the last",
    "saturated.rounding.x_exact_maximal__mutmut_62":
        "rows with a member unlike the first → rows with a member like it: the first is always like "
        "itself, so every tied row is compared exactly, which keeps the same members; only the work "
        "changes",
    "saturated.rounding.x_exact_maximal__mutmut_75":
        "`> 0` → `>= 0` in the search for the best member: it may move to a later member exactly equal to"
        " it, and the exact differences to either have the same zeros",
    "saturated.rounding.x_exact_maximal__mutmut_90":
        "torch.cat(dim=-1) → dim=+1: the members' partials and the best's are 2-D, so dimension 1 is the "
        "last",
    "empirical.models.experts.x_check_expert_memory__mutmut_5":
        "available_memory() read also for a model without experts: 0 bytes per token then fit in any "
        "memory reported, and None returns as before",
    "saturated.rules.routing.x__rank__mutmut_37":
        "`count` made of shape (1,) instead of (rows, 1): zeros broadcast the same against every (rows, "
        "·) tensor, and the first update makes it (rows, 1)",
    "saturated.rules.routing.x__rank__mutmut_57":
        "maximal over dim +1 instead of -1: the key's parts are (rows, n), so dimension 1 is the last",
    "saturated.rules.routing.x__rank__mutmut_67":
        "`count < k` → `count <= k` masking the group: a full row (count = k) then keeps its group, but "
        "`count + rank <= k` takes none of it, so nothing is written and nothing changes",
    "saturated.rules.routing.x__rank__mutmut_70":
        "`count < k` → `count <= k` in `emptied`: a full row is then marked emptied and given what is "
        "left, of which `count + rank <= k` takes none; its marks are read only at positions taken",
    "saturated.rules.routing.x__rank__mutmut_72":
        "`emptied` tested over every row (any(None)) instead of per row: a row emptied by a NaN then "
        "waits, taking nothing, until every other row is full, and takes what is left as before (same "
        "positions, open and live marks); only the number of passes changes",
    "saturated.rules.routing.x__rank__mutmut_74":
        "`emptied` tested over every row (any() of all) instead of per row: a row emptied by a NaN then "
        "waits, taking nothing, until every other row is full, and takes what is left as before; only the"
        " number of passes changes",
    "saturated.rules.routing.x__rank__mutmut_76":
        "group.any(+1) instead of any(-1): the group is (rows, n), so dimension 1 is the last",
    "saturated.rules.routing.x__rank__mutmut_86":
        "`all_settled &= settled` → `all_settled = settled`: maximal's `settled` depends only on the "
        "key's roundings and the settings, the same in every pass",
    "saturated.rules.routing.x__rank__mutmut_93":
        "group.sum(+1) instead of sum(-1): the group is (rows, n), so dimension 1 is the last",
    "saturated.rules.routing.x__rank__mutmut_98":
        "group.cumsum(+1) instead of cumsum(-1): the group is (rows, n), so dimension 1 is the last",
    "saturated.rules.routing.x__rank__mutmut_130":
        "`size > 1` → `size >= 1` in `over`: a group of one in an unfinished row (count < k) never "
        "overflows (count + 1 <= k), and a full row takes nothing",
    "saturated.rules.routing.x__rank__mutmut_140":
        "(…).any(+1) instead of any(-1) for `live`: the tensor is (rows, n), so dimension 1 is the last",
    "saturated.rules.routing.x__rank__mutmut_153":
        "take.sum(+1) instead of sum(-1): `take` is (rows, n), so dimension 1 is the last",
    "saturated.rules.routing.x__zero_at_every_order__mutmut_3":
        "the 0-dim start of `zero` made on the default device instead of the term's: a 0-dim CPU tensor "
        "combines with a tensor on any device, and `zero & (a == 0)` is on a's",
    "saturated.rules.routing.x__zero_at_every_order__mutmut_5":
        "the 0-dim start of `zero` made on the default device instead of the term's: a 0-dim CPU tensor "
        "combines with a tensor on any device, and `zero & (a == 0)` is on a's",
    "saturated.rules.routing.x__unknown_weights__mutmut_14":
        "the precondition assert's `and` → `or`: TiedWeights are built by the softmax rule with both "
        "candidates and count",
    "saturated.rules.routing.x__ranked__mutmut_7":
        "`dim % max(ndim, 1)` → `max(ndim, 2)`: every caller passes a dimension already reduced to [0, "
        "ndim) (0 for a 0-dim or 1-D term), which either leaves as it is",
    "saturated.rules.routing.x__positions_only__mutmut_53":
        "`dim % max(ndim, 1)` → `max(ndim, 2)`: every caller passes a dimension already reduced to [0, "
        "ndim) (0 for a 0-dim or 1-D term), which either leaves as it is",
    "saturated.rules.routing.x__indices__mutmut_12":
        "positions.shape[+1] instead of shape[-1]: the positions are (rows, k), so dimension 1 is the "
        "last",
    "saturated.rules.routing.x__refused__mutmut_5":
        "undetermined.any(+1) instead of any(-1): the mask is (rows, k), so dimension 1 is the last",
    "saturated.rules.routing.x__positions_only__mutmut_21":
        "gather(+1, …) instead of gather(-1, …): the unknown-weights mask is (rows, n), so dimension 1 is"
        " the last",
    "saturated.interpreter.xǁLimitInterpreterǁ__init____mutmut_4":
        "garbage_collect_values=True dropped: True is torch.fx.Interpreter's default",
    "saturated.interpreter.xǁLimitInterpreterǁ__init____mutmut_6":
        "extra_traceback = None instead of False: torch.fx reads it only as a truth value",
    "saturated.interpreter.xǁLimitInterpreterǁ__init____mutmut_29":
        "self.node starts as \"\" instead of None: run_node sets it before call_function reads it",
    "saturated.interpreter.xǁLimitInterpreterǁrun_node__mutmut_15":
        "_set_current_node(None) instead of the node: it only sets the node meta torch.fx copies to nodes"
        " a tracer creates while preserving node meta, and a limit run creates none",
    "saturated.interpreter.xǁLimitInterpreterǁrun_node__mutmut_33":
        "map_nodes_to_values(out, None): the override does not read its node argument",
    "saturated.interpreter.xǁLimitInterpreterǁrun_node__mutmut_40":
        "output(None, …) instead of the node's target: LimitInterpreter.output does not read its target",
    "saturated.interpreter.xǁLimitInterpreterǁrun_node__mutmut_42":
        "output(…, None) instead of {}: LimitInterpreter.output does not read its kwargs",
    "saturated.interpreter.xǁLimitInterpreterǁcall_function__mutmut_25":
        "tree_map's is_leaf=_is_term → None: Term (and TiedWeights) is no registered pytree node, so "
        "tree_map takes it as a leaf either way",
    "saturated.interpreter.xǁLimitInterpreterǁcall_function__mutmut_28":
        "tree_map's is_leaf=_is_term dropped: Term (and TiedWeights) is no registered pytree node, so "
        "tree_map takes it as a leaf either way",
    "saturated.interpreter.x_run_terms__mutmut_3":
        "swap set also when the model's dtype and the run's are the same: a cast to the same dtype and a "
        "dtype swapped for itself change nothing",
    "saturated.interpreter.x_run_terms__mutmut_23":
        "enable_io_processing=None instead of False: an exported program's graph module uses the plain fx"
        " CodeGen, whose process_inputs and process_outputs return what they are given",
    "saturated.interpreter.x_run_terms__mutmut_25":
        "enable_io_processing dropped (True): an exported program's graph module uses the plain fx "
        "CodeGen, whose process_inputs and process_outputs return what they are given",
    "saturated.interpreter.x_run_terms__mutmut_34":
        "enable_io_processing=True: an exported program's graph module uses the plain fx CodeGen, whose "
        "process_inputs and process_outputs return what they are given",
    "saturated.interpreter.x__cast__mutmut_4":
        "`isinstance(value, Tensor) and …` → `or`: only embedding outputs reach _cast, a Term (returned "
        "above) or a tensor, for which both agree",
    "empirical.training.fits.x__lag1_autocorrelation__mutmut_9":
        "`size < 3` → `size <= 3`: with 3 residuals the centred ones sum to 0, so "
        "Σcᵢcᵢ₊₁ = c₂(c₁ + c₃) = −c₂² ≤ 0, which the clip turns into the same 0",
    "empirical.training.fits.x__lag1_autocorrelation__mutmut_10":
        "`size < 3` → `size < 4`: with 3 residuals the centred ones sum to 0, so "
        "Σcᵢcᵢ₊₁ = c₂(c₁ + c₃) = −c₂² ≤ 0, which the clip turns into the same 0",
    "empirical.training.fits.x_fit_law__mutmut_20":
        "the step scale is t[-1] whatever its sign (`… or True`): at least 3 strictly increasing "
        "steps ≥ 0 make t[-1] > 0, the only case the code took anyway",
    "empirical.training.fits.x_fit_law__mutmut_24":
        "tests t[1] > 0 instead of t[-1] > 0: fit_law has at least 3 strictly increasing steps ≥ 0, "
        "so both hold",
    "empirical.training.fits.x_fit_law__mutmut_25":
        "tests t[-2] > 0 instead of t[-1] > 0: fit_law has at least 3 strictly increasing steps ≥ 0, "
        "so t[-2] ≥ t[1] > 0 and both hold",
    "empirical.training.fits.x_fit_law__mutmut_26":
        "`t[-1] > 0` → `t[-1] >= 0`: at least 3 strictly increasing steps ≥ 0 make t[-1] > 0 anyway",
    "empirical.training.fits.x_fit_law__mutmut_28":
        "the step scale for t[-1] ≤ 0 becomes 2.0: unreachable, at least 3 strictly increasing steps "
        "≥ 0 make t[-1] > 0",
    "empirical.training.resume.x_save_state__mutmut_36":
        "json.dumps(allow_nan=False) → allow_nan=None: json tests `not allow_nan` (the C encoder "
        "too), so None refuses NaN and infinity exactly as False does",
    "empirical.training.fits.x_extrapolation_scores__mutmut_31":
        "the head-size check `cut < k + 1` → `cut < k - 1`: for k - 1 ≤ cut < k + 1 fit_law refuses "
        "the head (k + 1 points needed) and the EmpiricalError is scored None, as the check would",
    "empirical.training.projection.xǁProjectionCurvesǁplot__mutmut_28":
        "every line's colour left to matplotlib: each axes gets exactly one plot call per variant, in "
        "order, so its colour cycle gives variant i the same C{i} (the zero line does not draw from "
        "the cycle)",
    "empirical.training.projection.xǁProjectionCurvesǁplot__mutmut_37":
        "the top panels' colour left to matplotlib: each axes gets one plot call per variant, in "
        "order, so its colour cycle gives variant i the same C{i}",
    "empirical.training.projection.xǁProjectionCurvesǁplot__mutmut_41":
        "the top panels' colour left to matplotlib: each axes gets one plot call per variant, in "
        "order, so its colour cycle gives variant i the same C{i}",
    "empirical.training.projection.xǁProjectionCurvesǁplot__mutmut_52":
        "the bottom panel's colour left to matplotlib: it gets one plot call per variant (also an "
        "empty one when ρ* is never reached), in order, so its colour cycle gives variant i C{i}",
    "empirical.training.projection.xǁProjectionCurvesǁplot__mutmut_57":
        "the bottom panel's colour left to matplotlib: it gets one plot call per variant (also an "
        "empty one when ρ* is never reached), in order, so its colour cycle gives variant i C{i}",
    "empirical.training.projection.xǁProjectionCurvesǁplot__mutmut_82":
        "a top panel's title fontsize \"medium\" → None: matplotlib sets None to rcParams['font.size'], "
        "which \"medium\" scales by exactly 1.0",
    "empirical.training.projection.xǁProjectionCurvesǁplot__mutmut_101":
        "the bottom panel's title fontsize \"medium\" → None: matplotlib sets None to "
        "rcParams['font.size'], which \"medium\" scales by exactly 1.0",
    "empirical.training.projection.xǁProjectionCurvesǁplot__mutmut_68":
        "axhline(0.0, …) → axhline(…): matplotlib's default y is 0",
    "empirical.measure.convergence.x_decay_rate__mutmut_19":
        "zip(*points, strict=True) → strict=None: every point is a (log c, log gap) pair, so the "
        "unzipped sequences never differ in length",
    "empirical.measure.convergence.x_decay_rate__mutmut_21":
        "zip(*points) without strict=True: every point is a (log c, log gap) pair, so the "
        "unzipped sequences never differ in length",
    "empirical.measure.convergence.x_decay_rate__mutmut_22":
        "zip(*points, strict=False): every point is a (log c, log gap) pair, so the unzipped "
        "sequences never differ in length",
    "empirical.measure.convergence.x_limit_convergence__mutmut_35":
        "c = 1 also run through scaled_forward: functional_call with θ·1.0, bit for bit the "
        "model's own parameters and forward",
    "empirical.measure.convergence.x_limit_convergence__mutmut_51":
        "forward(None, …, limit): forward reads the model only to name it when the call raises "
        "TypeError, and the limit (SaturatedModel) reports a forward that refuses the options as "
        "SaturationError, raised as EmpiricalError",
    "empirical.measure.convergence.x_limit_convergence__mutmut_87":
        "hidden_states(grown, stack, None): the model is read only to name it when a stack's "
        "states are missing, and the first batch's labels read the same fields of the limit's "
        "output with the model first; every pass is the same forward asked for the same fields",
    "empirical.measure.convergence.x_limit_convergence__mutmut_93":
        "hidden_states(target, stack, None): the model is read only to name it when a stack's "
        "states are missing, and the first batch's labels read the same target with the model "
        "first; every batch's limit is asked for the same fields",
    "empirical.measure.convergence.x_limit_convergence__mutmut_43":
        "labels start as None instead of []: the first batch sets them (`None or [...]`), a single "
        "process always has one (prepare refuses an empty text), and a rank without batches never "
        "reaches tuple(labels): reduce_sums refuses its empty sums first",
    "empirical.claims.api.x_model_batch__mutmut_13":
        "next(model.parameters(), torch.empty(1)) instead of torch.empty(0): the fallback is read "
        "only for its device, the CPU either way",
    "empirical.claims.api.x_model_batch__mutmut_75":
        "TokenizedCorpus(…, n_truncated=None, …): make_batches reads only the corpus's ids",
    "empirical.claims.api.x_model_batch__mutmut_76":
        "TokenizedCorpus(…, max_length=None): make_batches reads only the corpus's ids",
    "empirical.claims.api.x_model_batch__mutmut_82":
        "TokenizedCorpus(…, n_truncated=1, …): make_batches reads only the corpus's ids",
    "empirical.claims.api.x__outputs_at__mutmut_26":
        "functional_call(strict=False) → strict=None: torch only tests `if strict:`",
    "empirical.claims.api.x__outputs_at__mutmut_31":
        "strict=False dropped: functional_call's default is strict=False",
    "empirical.claims.api.x_assert_saturated__mutmut_58":
        "hidden_states(target, stack, None): the model is read only to name it when a stack's "
        "states are missing, and the same fields of the scaled pass (the same forward) are read "
        "with the model just before",
    "empirical.claims.api.x_assert_saturated__mutmut_41":
        "forward(None, …, run(c)): forward reads the model only to name it when the call raises "
        "TypeError, and the limit, computed first by the same forward under SaturatedModel, "
        "reports a forward that refuses the options as SaturationError (raised as EmpiricalError)",
    "empirical.claims.api.x_assert_homogeneous__mutmut_89":
        "the claimed report's nodes=None instead of []: check_scaling reads only its outputs",
    "empirical.claims.api.x_assert_homogeneous__mutmut_90":
        "the claimed report's modules=None instead of []: check_scaling reads only its outputs",
    "empirical.claims.api.x__remember__mutmut_5":
        "popitem(last=None) instead of last=False: OrderedDict.popitem reads `last` as a truth "
        "value, so None also removes the oldest entry",
    "empirical.measure.components.xǁComponentSaturationǁplot__mutmut_45":
        "set_title(fontsize=None) instead of \"medium\": matplotlib sets a None size to "
        "rcParams[\"font.size\"], and \"medium\" is that size scaled by 1.0",
    "saturated.bounds.x__exact_thresholds__mutmut_5":
        "200 → 201 bits: a narrower enclosure of the same threshold; _round_up of each of the 12 "
        "thresholds of the four formats format_thresholds accepts (the only callers) is the same "
        "number",
    "saturated.bounds.x__exact_thresholds__mutmut_8":
        "2^k − 1 → 2^k + 1 or 2^k − 2 moves the log by ~2^(−k), far below one unit of the format at "
        "the threshold: rounded up, all 12 thresholds of the four accepted formats are the same "
        "numbers",
    "saturated.bounds.x__exact_thresholds__mutmut_12":
        "2^k − 1 → 2^k + 1 or 2^k − 2 moves the log by ~2^(−k), far below one unit of the format at "
        "the threshold: rounded up, all 12 thresholds of the four accepted formats are the same "
        "numbers",
    "saturated.bounds.x__exact_thresholds__mutmut_15":
        "2^k − 1 → 2^k + 1 or 2^k − 2 moves the log by ~2^(−k), far below one unit of the format at "
        "the threshold: rounded up, all 12 thresholds of the four accepted formats are the same "
        "numbers",
    "saturated.bounds.x__exact_thresholds__mutmut_18":
        "2^k − 1 → 2^k + 1 or 2^k − 2 moves the log by ~2^(−k), far below one unit of the format at "
        "the threshold: rounded up, all 12 thresholds of the four accepted formats are the same "
        "numbers",
    "saturated.bounds.x__exact_thresholds__mutmut_22":
        "2^k − 1 → 2^k + 1 or 2^k − 2 moves the log by ~2^(−k), far below one unit of the format at "
        "the threshold: rounded up, all 12 thresholds of the four accepted formats are the same "
        "numbers",
    "saturated.bounds.x__exact_thresholds__mutmut_26":
        "2^k − 1 → 2^k + 1 or 2^k − 2 moves the log by ~2^(−k), far below one unit of the format at "
        "the threshold: rounded up, all 12 thresholds of the four accepted formats are the same "
        "numbers",
    "saturated.bounds.x__round_up__mutmut_19":
        "`shift >= 0` → `shift > 0` / `>= 1`: at shift = 0 both branches give the mantissa itself "
        "(man << 0 == -((-man) >> 0))",
    "saturated.bounds.x__round_up__mutmut_20":
        "`shift >= 0` → `shift > 0` / `>= 1`: at shift = 0 both branches give the mantissa itself "
        "(man << 0 == -((-man) >> 0))",
    "saturated.bounds.x__torch_function__mutmut_26":
        "stack/softmax dim −1 → +1: _measured always passes a 1-d tensor of numbers, so the pair's "
        "dim 1 is its last",
    "saturated.bounds.x__torch_function__mutmut_28":
        "stack/softmax dim −1 → +1: _measured always passes a 1-d tensor of numbers, so the pair's "
        "dim 1 is its last",
    "saturated.bounds.x__measured__mutmut_19":
        "torch.arange of Python ints without dtype is int64, the dtype the line names",
    "saturated.bounds.x__measured__mutmut_22":
        "torch.arange of Python ints without dtype is int64, the dtype the line names",
    "saturated.bounds.x__measured__mutmut_12":
        "window size (2^20 vs 2^21, < vs ≤), coarse sample size (2^16 vs 2^17) or the lower clamp "
        "only choose which codes are evaluated; torch's sigmoid, tanh and softmax stay saturated from"
        " their threshold on, so every choice finds the same first saturated number: all 12 rows of "
        "format_thresholds() are identical with each of these mutants",
    "saturated.bounds.x__measured__mutmut_14":
        "window size (2^20 vs 2^21, < vs ≤), coarse sample size (2^16 vs 2^17) or the lower clamp "
        "only choose which codes are evaluated; torch's sigmoid, tanh and softmax stay saturated from"
        " their threshold on, so every choice finds the same first saturated number: all 12 rows of "
        "format_thresholds() are identical with each of these mutants",
    "saturated.bounds.x__measured__mutmut_15":
        "window size (2^20 vs 2^21, < vs ≤), coarse sample size (2^16 vs 2^17) or the lower clamp "
        "only choose which codes are evaluated; torch's sigmoid, tanh and softmax stay saturated from"
        " their threshold on, so every choice finds the same first saturated number: all 12 rows of "
        "format_thresholds() are identical with each of these mutants",
    "saturated.bounds.x__measured__mutmut_36":
        "window size (2^20 vs 2^21, < vs ≤), coarse sample size (2^16 vs 2^17) or the lower clamp "
        "only choose which codes are evaluated; torch's sigmoid, tanh and softmax stay saturated from"
        " their threshold on, so every choice finds the same first saturated number: all 12 rows of "
        "format_thresholds() are identical with each of these mutants",
    "saturated.bounds.x__measured__mutmut_37":
        "window size (2^20 vs 2^21, < vs ≤), coarse sample size (2^16 vs 2^17) or the lower clamp "
        "only choose which codes are evaluated; torch's sigmoid, tanh and softmax stay saturated from"
        " their threshold on, so every choice finds the same first saturated number: all 12 rows of "
        "format_thresholds() are identical with each of these mutants",
    "saturated.bounds.x__measured__mutmut_39":
        "window size (2^20 vs 2^21, < vs ≤), coarse sample size (2^16 vs 2^17) or the lower clamp "
        "only choose which codes are evaluated; torch's sigmoid, tanh and softmax stay saturated from"
        " their threshold on, so every choice finds the same first saturated number: all 12 rows of "
        "format_thresholds() are identical with each of these mutants",
    "saturated.bounds.x__measured__mutmut_69":
        "window size (2^20 vs 2^21, < vs ≤), coarse sample size (2^16 vs 2^17) or the lower clamp "
        "only choose which codes are evaluated; torch's sigmoid, tanh and softmax stay saturated from"
        " their threshold on, so every choice finds the same first saturated number: all 12 rows of "
        "format_thresholds() are identical with each of these mutants",
    "saturated.bounds.x__measured__mutmut_71":
        "window size (2^20 vs 2^21, < vs ≤), coarse sample size (2^16 vs 2^17) or the lower clamp "
        "only choose which codes are evaluated; torch's sigmoid, tanh and softmax stay saturated from"
        " their threshold on, so every choice finds the same first saturated number: all 12 rows of "
        "format_thresholds() are identical with each of these mutants",
    "saturated.bounds.x__measured__mutmut_72":
        "window size (2^20 vs 2^21, < vs ≤), coarse sample size (2^16 vs 2^17) or the lower clamp "
        "only choose which codes are evaluated; torch's sigmoid, tanh and softmax stay saturated from"
        " their threshold on, so every choice finds the same first saturated number: all 12 rows of "
        "format_thresholds() are identical with each of these mutants",
    "saturated.bounds.x__certify_exceeds__mutmut_17":
        "sum(...) without the start iv.mpf(0) starts from the int 0; 0 + an interval is the same "
        "interval, and an empty sum is not possible for `near` (never empty here) and gives 0 for "
        "`far`, which t + 0 treats like iv.mpf(0)",
    "saturated.bounds.x__certify_exceeds__mutmut_28":
        "sum(...) without the start iv.mpf(0) starts from the int 0; 0 + an interval is the same "
        "interval, and an empty sum is not possible for `near` (never empty here) and gives 0 for "
        "`far`, which t + 0 treats like iv.mpf(0)",
    "saturated.bounds.x_certify_bound__mutmut_51":
        "ρ(∞) computed by _worst_ratio at e^(−u) = 0 or as 1/bound_scale: the same upper end for "
        "every function (softmax's is max(t, n − t)/big/scale with big = max(t, n − t)); checked "
        "equal for n ≤ 11 and six scales, and only the upper end is read",
    "saturated.bounds.x_certify_bound__mutmut_56":
        "ρ(∞) computed by _worst_ratio at e^(−u) = 0 or as 1/bound_scale: the same upper end for "
        "every function (softmax's is max(t, n − t)/big/scale with big = max(t, n − t)); checked "
        "equal for n ≤ 11 and six scales, and only the upper end is read",
    "saturated.bounds.x_certify_bound__mutmut_57":
        "ρ(∞) computed by _worst_ratio at e^(−u) = 0 or as 1/bound_scale: the same upper end for "
        "every function (softmax's is max(t, n − t)/big/scale with big = max(t, n − t)); checked "
        "equal for n ≤ 11 and six scales, and only the upper end is read",
    "saturated.bounds.x_certify_bound__mutmut_75":
        "max over point intervals (r.b) without key=float: their comparison is exact, so the same "
        "largest one is picked and converted",
    "saturated.bounds.x_certify_bound__mutmut_77":
        "max over point intervals (r.b) without key=float: their comparison is exact, so the same "
        "largest one is picked and converted",
    "saturated.bounds.x__certify__mutmut_60":
        "`hi > 1e300` written `hi > 1e+300`: the same float",
    "saturated.bounds.x__certify__mutmut_19":
        "`lo > 0` → `lo >= 0` in the quick check: lo = 0 only for an estimate of 0, and then hi = 0 "
        "too; the error cannot be both above eps at 0 and within eps from 0 on, and if the check "
        "passed it would return (0, 0), what the next line returns",
    "saturated.bounds.x__certify_rows__mutmut_48":
        "`lo > 0` → `lo >= 0`: lo = 0 only for an estimate of 0, where hi = 0 as well, and the error "
        "cannot be above eps at 0 (winners' or loser's lower end > eps) and within eps at 0 (their "
        "upper ends ≤ eps) at once",
    "saturated.bounds.x__exceeds__mutmut_18":
        "`if len(far) or True`: np.logaddexp.reduce of an empty array is −∞, what the else branch "
        "gives",
    "saturated.bounds.x__exceeds__mutmut_99":
        "`c > best` → `c >= best`: at c == best, best = c leaves it as it is",
    "saturated.bounds.x__exp_neg__mutmut_49":
        "np.minimum(k, 1100) → 1101: only entries with k > 1100 change, and every entry with k > 1000 "
        "is replaced by the tiny enclosure",
    "saturated.bounds.x__exp_neg__mutmut_70":
        "error > 1e-3 → ≥ 1e-3 or > 1.001: the error passes 1e-3 only for c·a > 2·10¹², where k > "
        "1000 already marks the entry tiny; a NaN error (NaN c·a) fails every comparison, and k ≤ "
        "1000 fails for it too",
    "saturated.bounds.x__exp_neg__mutmut_71":
        "error > 1e-3 → ≥ 1e-3 or > 1.001: the error passes 1e-3 only for c·a > 2·10¹², where k > "
        "1000 already marks the entry tiny; a NaN error (NaN c·a) fails every comparison, and k ≤ "
        "1000 fails for it too",
    "saturated.bounds.x_scale_bounds_of_rows__mutmut_38":
        "`x > 0` → `x >= 0`: x = eps·t²/(1 − eps·t) is never 0 for eps > 0 and t ≥ 1 (at least "
        "eps·t², negative, or ∞); its one caller (empirical.measure.heads) passes tie sets that hold "
        "at least the maximal weight",
    "saturated.bounds.x_scale_bounds_of_rows__mutmut_40":
        "`x < 1` → `x <= 1` or `x < 2`: for 1 ≤ x the clamp at 1 gives −log(1) = 0, so the lower "
        "bound is −0.0 (or NaN → 0.0 where δ + slack = 0), equal to the 0.0 the else branch gives",
    "saturated.bounds.x_scale_bounds_of_rows__mutmut_41":
        "`x < 1` → `x <= 1` or `x < 2`: for 1 ≤ x the clamp at 1 gives −log(1) = 0, so the lower "
        "bound is −0.0 (or NaN → 0.0 where δ + slack = 0), equal to the 0.0 the else branch gives",
    "saturated.bounds.x_scale_bounds_of_rows__mutmut_46":
        "the clamp's upper end (1) dropped or moved to 2: it changes log(x) only where x ≥ 1, and "
        "torch.where keeps those entries' 0.0",
    "saturated.bounds.x_scale_bounds_of_rows__mutmut_48":
        "the clamp's upper end (1) dropped or moved to 2: it changes log(x) only where x ≥ 1, and "
        "torch.where keeps those entries' 0.0",
    "saturated.bounds.x_scale_bounds_of_rows__mutmut_50":
        "the clamp's upper end (1) dropped or moved to 2: it changes log(x) only where x ≥ 1, and "
        "torch.where keeps those entries' 0.0",
    "saturated.bounds.x_scale_bounds_of_rows__mutmut_53":
        "lower.nan_to_num(None): torch reads nan=None as its default, 0.0",
    "saturated.bounds.xǁ_Boxǁat__mutmut_14":
        "padding gaps read as 1.0 instead of 0.0 in the moment: for c > 0 their enclosure is [0, 0] "
        "(c·∞ = ∞), so they add 0 either way; at c = 0 (an estimate of 0) lo = 0 and the row is not "
        "certified whatever its slope (lo > 0 is required), and rows without losers are certified "
        "regardless",
    "saturated.bounds.xǁ_Boxǁat__mutmut_25":
        "sum(+1) instead of sum(-1): the padded gaps, and so low, high and their products, are always "
        "2-d (rows, widest), where axis 1 is the last",
    "saturated.bounds.xǁ_Boxǁat__mutmut_29":
        "sum(+1) instead of sum(-1): the padded gaps, and so low, high and their products, are always "
        "2-d (rows, widest), where axis 1 is the last",
    "saturated.bounds.xǁ_Boxǁat__mutmut_36":
        "sum(+1) instead of sum(-1): the padded gaps, and so low, high and their products, are always "
        "2-d (rows, widest), where axis 1 is the last",
    "saturated.bounds.xǁ_Boxǁat__mutmut_46":
        "sum(+1) instead of sum(-1): the padded gaps, and so low, high and their products, are always "
        "2-d (rows, widest), where axis 1 is the last",
    "saturated.bounds.x__float_scales__mutmut_120":
        "`n > 0` → `n >= 0`: rows without losers (margin ∞) also get the top loser's search, but "
        "the last line sets the scale of every row without a finite margin to 0",
    "saturated.bounds.x__float_scales_of_loser__mutmut_11":
        "np.where(finite, gaps, 0.0) → 1.0 at the +∞ padding: those positions enter only as "
        "weight·gap with weight e^(−c·∞) = 0 for every c > 0 the bisections evaluate (they start from"
        " lo = 0 and only evaluate midpoints), so 0·1 adds 0 like 0·0",
    "saturated.bounds.x__float_scales_of_loser__mutmut_26":
        "sum over axis +1 instead of −1: the arrays summed are rows × positions (2-d), so axis 1 is "
        "the last axis",
    "saturated.bounds.x__float_scales_of_loser__mutmut_38":
        "sum over axis +1 instead of −1: the arrays summed are rows × positions (2-d), so axis 1 is "
        "the last axis",
    "saturated.bounds.x__float_scales__mutmut_5":
        "sum over axis +1 instead of −1: rows.gaps is always rows × widest (2-d, _Padded.of), so "
        "axis 1 is the last axis",
    "saturated.bounds.x__float_scales__mutmut_61":
        "sum over axis +1 instead of −1: c[:, None]·above is rows × positions (2-d), so axis 1 is the "
        "last axis",
    "saturated.bounds.x__float_scales__mutmut_36":
        "nan_to_num without nan=0.0: numpy replaces NaN with 0.0 by default",
    "saturated.bounds.x__float_scales__mutmut_48":
        "nan=1.0 instead of 0.0 for the bracket's upper end: it is NaN only as ∞/∞, where log(k/eps) "
        "overflows in a row without losers (margin ∞; a finite margin gives ∞, then posinf); those "
        "rows' bisection is overwritten by the last line's 0 and they are not in the top loser's search "
        "(n = 0)",
    "saturated.bounds.x__float_scales__mutmut_17":
        "errstate without divide='ignore': nothing here divides by zero or takes log 0 (k/eps > 0; a "
        "margin is positive, as distinct doubles differ, or ∞; the sums whose log is taken hold "
        "e^(−c·0) = 1, or are NaN in rows without losers; log t with t ≥ 1): no division warning "
        "under np.seterr(divide='raise') with subnormal and 10³⁰⁸ gaps and eps from 1e-320 to 1 − 1e-6",
    "saturated.bounds.x__float_scales__mutmut_20":
        "errstate without divide='ignore': nothing here divides by zero or takes log 0 (k/eps > 0; a "
        "margin is positive, as distinct doubles differ, or ∞; the sums whose log is taken hold "
        "e^(−c·0) = 1, or are NaN in rows without losers; log t with t ≥ 1): no division warning "
        "under np.seterr(divide='raise') with subnormal and 10³⁰⁸ gaps and eps from 1e-320 to 1 − 1e-6",
    "saturated.bounds.x__float_scales__mutmut_93":
        "errstate without divide='ignore': nothing here divides by zero or takes log 0 (k/eps > 0; a "
        "margin is positive, as distinct doubles differ, or ∞; the sums whose log is taken hold "
        "e^(−c·0) = 1, or are NaN in rows without losers; log t with t ≥ 1): no division warning "
        "under np.seterr(divide='raise') with subnormal and 10³⁰⁸ gaps and eps from 1e-320 to 1 − 1e-6",
    "saturated.bounds.x__float_scales__mutmut_96":
        "errstate without divide='ignore': nothing here divides by zero or takes log 0 (k/eps > 0; a "
        "margin is positive, as distinct doubles differ, or ∞; the sums whose log is taken hold "
        "e^(−c·0) = 1, or are NaN in rows without losers; log t with t ≥ 1): no division warning "
        "under np.seterr(divide='raise') with subnormal and 10³⁰⁸ gaps and eps from 1e-320 to 1 − 1e-6",
    "saturated.bounds.x__rows__mutmut_20":
        "dim +1 instead of −1: _rows only receives 2-d scores (_row adds the batch dimension, "
        "scale_to_saturate_map refuses other shapes), where dim 1 is the last",
    "saturated.bounds.x__rows__mutmut_38":
        "dim +1 instead of −1: _rows only receives 2-d scores (_row adds the batch dimension, "
        "scale_to_saturate_map refuses other shapes), where dim 1 is the last",
    "saturated.bounds.x__rows__mutmut_49":
        "dim +1 instead of −1: _rows only receives 2-d scores (_row adds the batch dimension, "
        "scale_to_saturate_map refuses other shapes), where dim 1 is the last",
    "saturated.bounds.x__rows__mutmut_32":
        "tie_set without the mask: the mask excludes only −∞ scores, which tie_set treats as masked by "
        "their scores (below any finite threshold; the tolerance's scale counts finite scores only), "
        "and rows whose maximum is −∞ were refused just before; equal on 3000 random maps with −∞, "
        "±1e300 and subnormal scores for rtol None, 0, 1e-2 and 0.5",
    "saturated.bounds.x__measured__mutmut_82":
        "the next window reaches one coarse sample further (codes[last + 2]): it still holds the last "
        "failure, and torch stays saturated from its threshold on, so the search finds the same first "
        "saturated number; format_thresholds() accepts only its four formats and three functions, and "
        "all 12 rows are identical with this mutant (no row's last failure is the second-to-last "
        "sample, where codes[last + 2] would not exist)",
    "saturated.bounds.x_certified_row_scales__mutmut_72":
        "β at zero weights 1.0 instead of 0.0: β is read only where `losers` holds (hopeless, the two "
        "gap bounds, the first loser's gap), and losers have p > 0",
    "saturated.bounds.x_certified_row_scales__mutmut_77":
        "losers with p ≥ 0 instead of p > 0 adds the allowed non-winners of weight 0, whose gap is +∞ "
        "and β 0: hopeless (∞ ≤ 0), both gap bounds (∞ where not a loser) and the first loser's gap "
        "(min with ∞) are unchanged, and `far` reads losers | under, which already held them",
    "saturated.bounds.x_certified_row_scales__mutmut_170":
        "found = None indexes with a new axis, so the same (row, nearest) pairs are set to −∞, and "
        "also those of tied rows without a finite high gap: there every non-winner of the mixed row "
        "is already −∞, and nearest (the argmin of all-∞, 0) at most turns one of t ≥ 2 winners to "
        "−∞, leaving a row without losers, whose scale is 0 either way; hi = max(hi, 0) is unchanged",
    "saturated.bounds.x_certified_row_scales__mutmut_202":
        "width reads mixed.shape[1] also without tied rows: mixed is then the 0-row selection of the "
        "n-column arrays, so its width is n, up's width, and the maximum is the same",
    "saturated.bounds.x_certified_row_scales__mutmut_204":
        "width max(n, 1) instead of max(n, 0) without tied rows: n, the number of positions, is at "
        "least 1",
    "saturated.bounds.x_certified_row_scales__mutmut_219":
        "the padded concatenation also without tied rows: mixed has no rows then and width is up's, so "
        "widen changes nothing and the grid is [up, down] as before",
    "saturated.bounds.x_certified_row_scales__mutmut_213":
        "widen also pads one −∞ column in front: −∞ masks a position, and every row of the grid gets "
        "it, so each row's scale is the same",
    "saturated.bounds.x_certified_row_scales__mutmut_255":
        "first = order[0] also when its high gap is ∞: that position is then no loser (a loser's high "
        "gap is finite), so `losers[i, first]` fails and far stays as it was, as with first = −1",
    "saturated.bounds.x_certified_row_scales__mutmut_259":
        "first = +1 or −2 instead of −1 when no loser has a finite high gap: then the row has no loser "
        "(their high gaps are finite), so losers[i, 1] fails (a tied row has at least 2 columns), and "
        "−2 fails first >= 0, as −1 does",
    "saturated.bounds.x_certified_row_scales__mutmut_260":
        "first = +1 or −2 instead of −1 when no loser has a finite high gap: then the row has no loser "
        "(their high gaps are finite), so losers[i, 1] fails (a tied row has at least 2 columns), and "
        "−2 fails first >= 0, as −1 does",
    "saturated.bounds.x_certified_row_scales__mutmut_261":
        "the first value of far (None, or losers & under, which is empty) is kept only when first = −1, "
        "that is when no loser has a finite high gap; near is then empty and _exceeds returns 0 before "
        "reading far",
    "saturated.bounds.x_certified_row_scales__mutmut_262":
        "the first value of far (None, or losers & under, which is empty) is kept only when first = −1, "
        "that is when no loser has a finite high gap; near is then empty and _exceeds returns 0 before "
        "reading far",
    "saturated.bounds.x_certified_row_scales__mutmut_263":
        "`first >= 0 or losers[i, first]`: first = −1 only in rows without losers (a loser's high gap "
        "is finite), where losers[i, −1] is False; for first ≥ 0 the position is a loser either way",
    "saturated.bounds.x__exceeds__mutmut_79":
        "min(last + 1, len(grid) + 1) instead of len(grid) − 1: the same whenever last ≤ len(grid) − 2. "
        "At the grid's end c = log(max(n, 2)/(t·eps))/δ the two lower bounds are at most eps/t (R ≤ "
        "n·e^(−cδ)) and eps/max(n, 2) (x ≤ e^(−cδ)), half of eps for the t ≥ 2 of the only caller, so "
        "the last grid point is never above eps",
    "homogeneity.program.x_output_names__mutmut_10":
        "labels read s.arg.name for non-tensor outputs too: every non-tensor user output of a "
        "static export (ints and floats are specialised) is a ConstantArgument, whose name is '', "
        "the label given to non-tensor outputs anyway",
    "homogeneity.program.x_output_names__mutmut_26":
        "the fallback after `kinds or` is read only when no non-tensor output has an empty label; "
        "every non-tensor user output of a static export is a ConstantArgument, named ''",
    "homogeneity.program.x_output_names__mutmut_27":
        "the fallback after `kinds or` is read only when no non-tensor output has an empty label; "
        "every non-tensor user output of a static export is a ConstantArgument, named ''",
    # the lemmas (homogeneity/lemmas/): a proof step that proves the same identity
    "homogeneity.lemmas.algebra.x_function_claim__mutmut_19":
        "`x.value < 0` → `x.value <= 0` right after `x.value == 0` returned: the two differ only "
        "at 0",
    "homogeneity.lemmas.algebra.x_product__mutmut_27":
        "`sum(values, Fraction(0))` → `sum(values)`: the degrees are Fractions, and with no "
        "factor the int 0 and Fraction(0) compare, hash and print alike, so the Deg and its text "
        "are the same",
    "homogeneity.lemmas.activations.x__logsumexp_linear__mutmut_3":
        "the symbol m of the top score no longer real: the expression handed to "
        "exponentially_close is −mt − t(d − m) + log(e^(dt) + 1), which is −dt + log(e^(dt) + 1) "
        "term by term (m cancels), so the limits and the verdict are those of the original",
    "homogeneity.lemmas.activations.x__logsumexp_linear__mutmut_5":
        "the symbol m of the top score no longer real: the expression handed to "
        "exponentially_close is −mt − t(d − m) + log(e^(dt) + 1), which is −dt + log(e^(dt) + 1) "
        "term by term (m cancels), so the limits and the verdict are those of the original",
    "homogeneity.lemmas.activations.x__logsumexp_linear__mutmut_8":
        "the symbol m of the top score no longer real: the expression handed to "
        "exponentially_close is −mt − t(d − m) + log(e^(dt) + 1), which is −dt + log(e^(dt) + 1) "
        "term by term (m cancels), so the limits and the verdict are those of the original",
    "homogeneity.lemmas.activations.x__logsumexp_linear__mutmut_6":
        "the symbol m renamed: it cancels, and the expression handed to exponentially_close is "
        "log(1 + e^(−dt)), the same function as the original −dt + log(e^(dt) + 1)",
    "homogeneity.lemmas.activations.x__logsumexp_linear__mutmut_7":
        "the symbol m renamed: it cancels, and the expression handed to exponentially_close is "
        "log(1 + e^(−dt)), the same function as the original −dt + log(e^(dt) + 1)",
    "homogeneity.lemmas.activations.x__logsumexp_linear__mutmut_24":
        "expand_log without force=True: simplify has already written the remainder as −dt + "
        "log(e^(dt) + 1), which expand_log leaves as it is either way",
    "homogeneity.lemmas.activations.x__logsumexp_linear__mutmut_26":
        "expand_log without force=True: simplify has already written the remainder as −dt + "
        "log(e^(dt) + 1), which expand_log leaves as it is either way",
    "homogeneity.lemmas.activations.x__logsumexp_linear__mutmut_30":
        "expand_log without force=True: simplify has already written the remainder as −dt + "
        "log(e^(dt) + 1), which expand_log leaves as it is either way",
    "homogeneity.lemmas.elementwise.x__power_lemma__mutmut_29":
        "the free exponent p of pow no longer real: (tz)^p = t^p·z^p for positive t and z and any "
        "complex p, so the identity and the proof's verdict are the same",
    "homogeneity.lemmas.elementwise.x__power_lemma__mutmut_31":
        "the free exponent p of pow no longer real: (tz)^p = t^p·z^p for positive t and z and any "
        "complex p, so the identity and the proof's verdict are the same",
    "homogeneity.lemmas.elementwise.x__power_lemma__mutmut_34":
        "the free exponent p of pow no longer real: (tz)^p = t^p·z^p for positive t and z and any "
        "complex p, so the identity and the proof's verdict are the same",
    "homogeneity.lemmas.elementwise.x__power_lemma__mutmut_32":
        "the free exponent's symbol renamed: the identity (tz)^p = t^p·z^p does not depend on its "
        "name",
    "homogeneity.lemmas.elementwise.x__power_lemma__mutmut_33":
        "the free exponent's symbol renamed: the identity (tz)^p = t^p·z^p does not depend on its "
        "name",
    "homogeneity.lemmas.elementwise.x__saturates__mutmut_29":
        "the positive symbol s renamed: sign((1/z + s)·z) and hardtanh of it are 1 whatever s is "
        "called",
    "homogeneity.lemmas.elementwise.x__saturates__mutmut_30":
        "the positive symbol s renamed: sign((1/z + s)·z) and hardtanh of it are 1 whatever s is "
        "called",
    "homogeneity.lemmas.elementwise.x__saturates__mutmut_36":
        "hardtanh's lower bound changed: past t = 1/z its input u = 1 + s·z exceeds 1, where "
        "Min(1) = 1 as for min(1, max(−1, u)), so simplify gives 1 either way",
    "homogeneity.lemmas.elementwise.x__saturates__mutmut_40":
        "hardtanh's lower bound changed: past t = 1/z its input u = 1 + s·z exceeds 1, where "
        "min(1, u) = 1 as for min(1, max(−1, u)), so simplify gives 1 either way",
    "homogeneity.lemmas.elementwise.x__saturates__mutmut_42":
        "hardtanh's lower bound changed: past t = 1/z its input u = 1 + s·z exceeds 1, where "
        "min(1, max(1, u)) = 1 as for min(1, max(−1, u)), so simplify gives 1 either way",
    "homogeneity.lemmas.elementwise.x__saturates__mutmut_43":
        "hardtanh's lower bound changed: past t = 1/z its input u = 1 + s·z exceeds 1, where "
        "min(1, max(−2, u)) = 1 as for min(1, max(−1, u)), so simplify gives 1 either way",
    "homogeneity.lemmas.elementwise.x__saturates__mutmut_49":
        "sign and hardtanh checked past t = 2/z instead of 1/z: both inputs, 1 + s·z and 2 + s·z, "
        "exceed 1, where sign and hardtanh are 1",
    "homogeneity.lemmas.elementwise.x__sum_law__mutmut_1":
        "alpha's default 1 → 2: the law reads alpha only through `alpha == 0`, false for both",
    "homogeneity.lemmas.normalization.x__no_eps__mutmut_19":
        "_centred(0, 2) instead of _centred(0, 1) as the unscaled side: without eps the "
        "normalized entry is the same at every scale (1 for LayerNorm, √2 for RMSNorm), so both "
        "sides are equal constants",
    "homogeneity.lemmas.normalization.x__no_eps__mutmut_37":
        "_rms(0, 2) instead of _rms(0, 1) as the unscaled side: without eps the normalized entry "
        "is the same at every scale (1 for LayerNorm, √2 for RMSNorm), so both sides are equal "
        "constants",
    "homogeneity.verify.lemmas.x__disagreement__mutmut_30":
        "`got if isinstance(got, str) else str(got)` → `str(got)` inside an f-string: str of a "
        "string is itself, and the f-string formats a Deg with str anyway",
    "homogeneity.verify.lemmas.x__disagreement__mutmut_31":
        "`got if isinstance(got, str) else str(got)` → `got` inside an f-string: the f-string "
        "formats a Deg with str, which is what str(got) gives",
    "homogeneity.lemmas.normalization.x__native_layer_norm_law__mutmut_2":
        "normalized_shape → None passed on: the layer norm law never reads normalized_shape",
    "homogeneity.lemmas.normalization.x__normalized__mutmut_35":
        "`x.value > 0` → `x.value >= 0` after `x.value == 0` returned: the two differ only at 0",
    "homogeneity.lemmas.normalization.x__difference_law__mutmut_1":
        "n's default 1 → 2: the law never reads n (every difference is a sum of terms of x's "
        "degree)",
    "homogeneity.lemmas.normalization.x__layer_norm_law__mutmut_2":
        "cudnn_enable's default True → False: the law never reads it",
    "homogeneity.lemmas.products.x__addmm_law__mutmut_1":
        "beta's default 1 → 2: the law reads beta only through `beta == 0`, false for both",
    "homogeneity.lemmas.products.x__addmm_law__mutmut_2":
        "alpha's default 1 → 2: the law never reads alpha (a constant factor keeps the degree)",
    "homogeneity.lemmas.routing.x__scattering_law__mutmut_1":
        "alpha's default 1 → 2: the law reads alpha only through is_literal_zero(alpha), false "
        "for both",
    "homogeneity.lemmas.shape.x__concatenation_law__mutmut_1":
        "dim's default 0 → 1: the law never reads dim",
    "homogeneity.lemmas.shape.x__constant_law__mutmut_6":
        "the claim's conditions left to their default, the empty tuple the original passes",
    "homogeneity.lemmas.shape.x__moved_law__mutmut_12":
        "the claim's conditions left to their default, the empty tuple the original passes",
    "homogeneity.lemmas.shape.x__pad_law__mutmut_3":
        "the fill found when no number is given: None instead of 0, and the law treats None and a "
        "literal 0 alike (zero padding moves entries)",
    "homogeneity.lemmas.shape.x__pad_law__mutmut_13":
        "the fill value → None in the sum: a literal number and None are both read as a constant "
        "term of degree 0 (as_deg), so the claim is the same",
    "homogeneity.lemmas.shape.x__moves_entries__mutmut_4":
        "an entry of one of the fixed matrices P changed: every fixed matrix commutes with "
        "scaling, P·(tz) − t·(P·z) is the zero vector for each, so the proof passes as before",
    "homogeneity.lemmas.shape.x__moves_entries__mutmut_5":
        "an entry of one of the fixed matrices P changed: every fixed matrix commutes with "
        "scaling, P·(tz) − t·(P·z) is the zero vector for each, so the proof passes as before",
    "homogeneity.lemmas.shape.x__moves_entries__mutmut_6":
        "an entry of one of the fixed matrices P changed: every fixed matrix commutes with "
        "scaling, P·(tz) − t·(P·z) is the zero vector for each, so the proof passes as before",
    "homogeneity.lemmas.shape.x__moves_entries__mutmut_7":
        "an entry of one of the fixed matrices P changed: every fixed matrix commutes with "
        "scaling, P·(tz) − t·(P·z) is the zero vector for each, so the proof passes as before",
    "homogeneity.lemmas.shape.x__moves_entries__mutmut_9":
        "an entry of one of the fixed matrices P changed: every fixed matrix commutes with "
        "scaling, P·(tz) − t·(P·z) is the zero vector for each, so the proof passes as before",
    "homogeneity.lemmas.shape.x__moves_entries__mutmut_10":
        "an entry of one of the fixed matrices P changed: every fixed matrix commutes with "
        "scaling, P·(tz) − t·(P·z) is the zero vector for each, so the proof passes as before",
    "homogeneity.lemmas.shape.x__moves_entries__mutmut_11":
        "an entry of one of the fixed matrices P changed: every fixed matrix commutes with "
        "scaling, P·(tz) − t·(P·z) is the zero vector for each, so the proof passes as before",
    "homogeneity.lemmas.shape.x__moves_entries__mutmut_12":
        "an entry of one of the fixed matrices P changed: every fixed matrix commutes with "
        "scaling, P·(tz) − t·(P·z) is the zero vector for each, so the proof passes as before",
    "homogeneity.lemmas.shape.x__moves_entries__mutmut_14":
        "an entry of one of the fixed matrices P changed: every fixed matrix commutes with "
        "scaling, P·(tz) − t·(P·z) is the zero vector for each, so the proof passes as before",
    "homogeneity.lemmas.shape.x__moves_entries__mutmut_15":
        "an entry of one of the fixed matrices P changed: every fixed matrix commutes with "
        "scaling, P·(tz) − t·(P·z) is the zero vector for each, so the proof passes as before",
    "homogeneity.lemmas.shape.x__moves_entries__mutmut_16":
        "an entry of one of the fixed matrices P changed: every fixed matrix commutes with "
        "scaling, P·(tz) − t·(P·z) is the zero vector for each, so the proof passes as before",
    "homogeneity.lemmas.shape.x__moves_entries__mutmut_17":
        "an entry of one of the fixed matrices P changed: every fixed matrix commutes with "
        "scaling, P·(tz) − t·(P·z) is the zero vector for each, so the proof passes as before",
    "homogeneity.lemmas.products.x__row_lookup__mutmut_5":
        "an entry of the fixed row vector changed: every fixed row commutes with scaling, e·(tW) "
        "− t·(e·W) is the zero row, so the proof passes as before",
    "homogeneity.lemmas.products.x__row_lookup__mutmut_6":
        "an entry of the fixed row vector changed: every fixed row commutes with scaling, e·(tW) "
        "− t·(e·W) is the zero row, so the proof passes as before",
    "homogeneity.lemmas.algebra.x_polynomially_close__mutmut_19":
        "the second order tried 2 → 3: it is tried only when r·t does not tend to a finite limit, "
        "and a remainder r → 0 with r·t unbounded has r·t² and r·t³ unbounded as well, so neither "
        "order ever decides and the answer is that of the first",
    "homogeneity.lemmas.algebra.x_polynomially_close__mutmut_28":
        "r·t·order instead of r·t^order: equal for order 1; order 2 is tried only when r·t has no "
        "finite limit, and then neither 2·r·t nor r·t² has one, so the answer is the same",
    "homogeneity.lemmas.elementwise.x__threshold_settles__mutmut_6":
        "the positive symbol s renamed: Heaviside(s·z) = 1 whatever s is called",
    "homogeneity.lemmas.elementwise.x__threshold_settles__mutmut_7":
        "the positive symbol s renamed: Heaviside(s·z) = 1 whatever s is called",
    "homogeneity.lemmas.elementwise.x__threshold_settles__mutmut_10":
        "the threshold θ no longer real: (θ/z + s)·z − θ = s·z whatever θ is, so the step is "
        "Heaviside(s·z) = 1 as before",
    "homogeneity.lemmas.elementwise.x__threshold_settles__mutmut_12":
        "the threshold θ no longer real: (θ/z + s)·z − θ = s·z whatever θ is, so the step is "
        "Heaviside(s·z) = 1 as before",
    "homogeneity.lemmas.elementwise.x__threshold_settles__mutmut_15":
        "the threshold θ no longer real: (θ/z + s)·z − θ = s·z whatever θ is, so the step is "
        "Heaviside(s·z) = 1 as before",
    "homogeneity.lemmas.elementwise.x__threshold_settles__mutmut_13":
        "the threshold's symbol renamed: it cancels, (θ/z + s)·z − θ = s·z",
    "homogeneity.lemmas.elementwise.x__threshold_settles__mutmut_14":
        "the threshold's symbol renamed: it cancels, (θ/z + s)·z − θ = s·z",
    "homogeneity.lemmas.elementwise.x__clamp_law__mutmut_17":
        "the limit 'none' → another word: function_claim gives no degree for a growing input with "
        "any limit other than 'constant' and 'linear'",
    "homogeneity.lemmas.elementwise.x__clamp_law__mutmut_22":
        "the limit 'none' → another word: function_claim gives no degree for a growing input with "
        "any limit other than 'constant' and 'linear'",
    "homogeneity.lemmas.elementwise.x__clamp_law__mutmut_23":
        "the limit 'none' → another word: function_claim gives no degree for a growing input with "
        "any limit other than 'constant' and 'linear'",
    "homogeneity.certificate.xǁCertificateǁto_json__mutmut_14":
        "ensure_ascii=False → None: json reads the flag only for its truth, and None is false "
        "like False, so the text keeps its non-ASCII characters as written",
    "homogeneity.checker.x__same_graph__mutmut_15":
        "a leaf's wiring read with node_inputs instead of set to (): placeholder and get_attr "
        "nodes have no arguments, so node_inputs gives () for them as well",
    "homogeneity.verify.euler.x_check_euler__mutmut_26":
        "the output names read from a run at c = 2.0 instead of 1.0: the names are the output's "
        "paths, the same at every scale",
    "homogeneity.verify.euler.x_check_euler__mutmut_41":
        "c = 1 as a float32 scalar instead of float64: a 0-dim tensor does not set the dtype of "
        "the float64 parameters it scales, and 1.0 and its unit tangent are exact in both",
    "homogeneity.verify.euler.x_check_euler__mutmut_43":
        "c = 1 as a float32 scalar instead of float64: a 0-dim tensor does not set the dtype of "
        "the float64 parameters it scales, and 1.0 and its unit tangent are exact in both",
    "empirical.training.norms.x__chunked_sums__mutmut_3":
        "the per-tensor dot products are collected (as zeros) also without a previous checkpoint: "
        "they reach _observe only when no θ was recorded before, when _previous_sq is None too, so "
        "no cosine is computed from them",
    "empirical.training.norms.x__ordered_layers__mutmut_13":
        "embeddings' sort key (-1, 0) → (-2, 0): still below every stack's rank (≥ 0)",
    "empirical.training.norms.x__ordered_layers__mutmut_14":
        "embeddings' sort key (-1, 0) → (-1, 1): the layers are a set, so no other key starts with -1 "
        "and the second element is never compared",
    "empirical.training.norms.x__ordered_layers__mutmut_18":
        "other's sort key (n, 0) → (n, 1): every block's stack rank is below n = len(stack_rank) and "
        "the layers are a set, so the second element is never compared",
    "empirical.training.norms.xǁNormTrackerǁ__init____mutmut_70":
        "layer_names.index → rindex: layer_names come from a set (_ordered_layers), each name once",
    "empirical.training.norms.xǁNormTrackerǁ__init____mutmut_96":
        "layer_names.index → rindex: layer_names come from a set (_ordered_layers), each name once",
    "empirical.training.norms.xǁNormTrackerǁ__init____mutmut_103":
        "group_names.index → rindex: group_names come from dict.fromkeys, each name once",
    "empirical.training.norms.xǁNormTrackerǁ__init____mutmut_133":
        "_previous_sq starts as '' instead of None: it is read only with a layer_dot, which needs a "
        "previous θ, and every path that sets one (_observe, resume) sets _previous_sq with it",
    "empirical.training.norms.xǁNormTrackerǁ_observe_parameters__mutmut_27":
        "layer_dot = '' instead of None before the first record: _observe uses it only when "
        "_previous_sq is set, which it is not before the first record",
    "empirical.training.norms.xǁNormTrackerǁ_observe__mutmut_17":
        "`layer_dot is not None and self._previous_sq is not None` → `or`: the two are always set "
        "together (a previous θ exists once a record or resume set both), so both parts are true or "
        "both false",
    "empirical.training.norms.xǁNormTrackerǁto_json__mutmut_6":
        "json.dumps(allow_nan=None): the encoder tests `not allow_nan`, so None refuses NaN like False",
    "empirical.training.runs.x__make_optimizer__mutmut_32":
        "Adafactor without warmup_init=False: its default is False, and it is read only with "
        "relative_step, which is off",
    "empirical.training.runs.xǁCompactTokenizerǁfit__mutmut_8":
        "base(..., verbose=None): the tokenizer tests verbose for truth only (`... and verbose`), so "
        "None warns no more than False",
    "empirical.training.runs.x__blocks__mutmut_3":
        "tokenizer(..., verbose=None): the base tokenizer tests verbose for truth only, so None warns "
        "no more than False",
    "empirical.training.runs.xǁScaleInvariantLMǁforward__mutmut_2":
        "return_dict's default False instead of True: forward never reads it and always returns a "
        "CausalLMOutput",
    "empirical.training.runs.x__evaluate__mutmut_53":
        "the c = ∞ key from f'{scale:g}' instead of the literal: format(math.inf, 'g') is 'inf' too",
    "empirical.training.runs.x_evaluation_steps__mutmut_5":
        "np.rint(...).astype(None) is float64 instead of int: the values are whole after np.rint, "
        "np.unique orders and dedupes them alike, and the return converts each with int()",
    "empirical.training.runs.xǁ_ScaleInvariantBlockǁ__init____mutmut_5":
        "nn.Linear(bias=None): Linear tests `if bias:`, so None makes no bias, like False",
    "empirical.training.runs.xǁ_ScaleInvariantBlockǁ__init____mutmut_13":
        "bias=None for the key layer: nn.Linear tests `if bias:`, so None adds no bias, as False",
    "empirical.training.runs.xǁ_ScaleInvariantBlockǁ__init____mutmut_21":
        "bias=None for the value layer: nn.Linear tests `if bias:`, so None adds no bias, as False",
    "empirical.training.runs.xǁ_ScaleInvariantBlockǁ__init____mutmut_29":
        "bias=None for the output layer: nn.Linear tests `if bias:`, so None adds no bias, as False",
    "empirical.training.runs.xǁ_ScaleInvariantBlockǁ__init____mutmut_37":
        "bias=None for the up layer: nn.Linear tests `if bias:`, so None adds no bias, as False",
    "empirical.training.runs.xǁ_ScaleInvariantBlockǁ__init____mutmut_47":
        "bias=None for the down layer: nn.Linear tests `if bias:`, so None adds no bias, as False",
    "empirical.training.runs.xǁ_ScaleInvariantBlockǁforward__mutmut_32":
        "k.transpose(-1, +2) on the 4-D (batch, heads, length, size) keys: dimension 2 is dimension -2",
    "empirical.training.runs.xǁ_ScaleInvariantBlockǁforward__mutmut_35":
        "sqrt(width / heads) for sqrt(width // heads): split's view needs heads to divide width, so "
        "both are the same whole number",
    "empirical.training.runs.xǁ_ScaleInvariantBlockǁforward__mutmut_45":
        "float('-INF') for float('-inf'): float() reads infinity case-insensitively",
    "empirical.training.runs.x__train__mutmut_49":
        "the scale-invariance check traced on two training rows instead of one: the analysis reads "
        "the graph, not the values, and its whole report is the same (checked on two seeds)",
    "empirical.training.runs.x__train__mutmut_284":
        "bar.set_postfix(refresh=None): tqdm tests `if refresh:`, so None skips the redraw like False",
    "empirical.training.callbacks.xǁNormCallbackǁ__init____mutmut_24":
        "_logged_step starts as '' instead of None: on_log reads it only once a tracker exists, and "
        "on_train_begin sets it to None when it makes the tracker",
    "empirical.training.callbacks.xǁNormCallbackǁon_train_begin__mutmut_15":
        "_logged_step reset to '' instead of None: it is only compared (!=) with integer steps, which "
        "equal neither",
    "empirical.training.callbacks.xǁNormCallbackǁ_go_before_integrations__mutmut_4":
        "the search for the calling CallbackHandler starts one frame higher: the skipped frame is the "
        "hook (on_init_end, on_train_begin), whose self is this callback, not a handler",
    "empirical.training.callbacks.xǁNormCallbackǁ_go_before_integrations__mutmut_25":
        "next(...) without the default None: the handler found on the stack is calling this "
        "callback's event from its own list, so the callback is always found",
    "empirical.training.callbacks.xǁNormCallbackǁ_go_before_integrations__mutmut_32":
        "first < mine → first <= mine: they index two different callbacks (an integration and this "
        "one), so they are never equal",
    "empirical.training.probe.xǁSaturationProbeǁmeasure__mutmut_18":
        "head_atlas(paper=None) instead of False: measure_heads reads paper only for its truth "
        "(`if paper`, with_paper), and the probe keeps only layer, head and scale of the atlas",
    "homogeneity.certify.x_certify__mutmut_24":
        "`continue` → `break` at the output node: the graph of an exported program ends with its "
        "one output node (torch.export writes it last; fx's code returns there), so no node is "
        "left after it to skip",
    "homogeneity.certify.x_versions__mutmut_4":
        "metadata.version('NORMSAT') instead of 'normsat': importlib.metadata looks distributions "
        "up by their normalized name, lower-cased (PEP 503), so it finds the same one",
    "homogeneity.certify.x__within_rounding__mutmut_1":
        "`or` → `and` between the two None tests: past the grade test both degrees have one grade, "
        "and a degree's value is None exactly when its grade is none, so both are None or neither",
    "homogeneity.verify.scaling.x_classify_decay__mutmut_31":
        "`slopes[-1] > -0.5` → `>= -0.5`: a slope is log2 of a ratio of two float64 changes, and no "
        "float64 has a log2 of exactly -0.5 (2^-0.5 is irrational; the two floats around it give "
        "-0.4999999999999999 and -0.5000000000000001), so the two comparisons never differ",
    "homogeneity.verify.euler.x_check_euler__mutmut_53":
        "jvp(...)[:3] instead of [:2]: torch.func.jvp returns a pair (outputs, tangents), so both "
        "slices are the whole pair",
    "homogeneity.analysis.xǁDegreeInterpreterǁ__init____mutmut_2":
        "garbage_collect_values=None: the interpreter stores every node's degree in "
        "node.meta and propagate reads them from there, so whether the run's environment frees "
        "a value after its last use changes nothing",
    "homogeneity.analysis.xǁDegreeInterpreterǁ__init____mutmut_4":
        "garbage_collect_values=left to fx's default (True): the interpreter stores every node's degree in "
        "node.meta and propagate reads them from there, so whether the run's environment frees "
        "a value after its last use changes nothing",
    "homogeneity.analysis.xǁDegreeInterpreterǁ__init____mutmut_5":
        "garbage_collect_values=True: the interpreter stores every node's degree in "
        "node.meta and propagate reads them from there, so whether the run's environment frees "
        "a value after its last use changes nothing",
    "empirical.measure.heads.x__across_ranks__mutmut_11":
        "the combined totals' rtol=None: rtol judges ties while each rank measures its rows "
        "(_measure_layer); _finish, the only reader of the combined totals, never reads it",
    "empirical.measure.heads.x__across_ranks__mutmut_17":
        "the combined totals' rtol left at its default 0.0: rtol judges ties while each rank "
        "measures its rows (_measure_layer); _finish, the only reader of the combined totals, never "
        "reads it",
    "empirical.measure.heads.x__attentions__mutmut_9":
        "`attentions is None and isinstance(output, Mapping)` → `or`: also re-reads the field with "
        ".get() when the attribute was found; a Hugging Face ModelOutput keeps attribute and key in "
        "sync and a plain dict has no such attribute, so the attentions read are the same",
    "empirical.measure.heads.x__is_causal__mutmut_14":
        "getattr(config, 'is_decoder', None) instead of False: bool(None) is False too",
    "empirical.measure.heads.x__is_causal__mutmut_23":
        "getattr(config, 'model_type', None) instead of '': neither None nor '' is a causal model "
        "type",
    "empirical.measure.heads.x__is_causal__mutmut_29":
        "getattr(config, 'model_type', 'XXXX') instead of '': neither is a causal model type",
    "empirical.measure.heads.x__is_causal__mutmut_34":
        "getattr(module, 'is_causal', None) instead of False: `None is True` is False like `False "
        "is True`",
    "empirical.measure.heads.x__measure_layer__mutmut_1":
        "f32 = None: the positions counted (attended.sum, and the paper's count) are then summed as "
        "int64 instead of float32 before .double(): both are exact integer counts",
    "empirical.measure.heads.x__measure_layer__mutmut_11":
        "attended.sum(-1, dtype=None): an exact int64 count instead of an exact float32 one (at "
        "most the number of keys), then .double()",
    "empirical.measure.heads.x__measure_layer__mutmut_13":
        "attended.sum(-1) without dtype: an exact int64 count instead of an exact float32 one (at "
        "most the number of keys), then .double()",
    "empirical.measure.heads.x__measure_layer__mutmut_75":
        "the paper's count summed with dtype=None: an exact int64 count instead of an exact float32 "
        "one (at most the number of keys), then .double()",
    "empirical.measure.heads.x__measure_layer__mutmut_77":
        "the paper's count summed without dtype: an exact int64 count instead of an exact float32 "
        "one (at most the number of keys), then .double()",
    "empirical.measure.heads.x__measure_layer__mutmut_166":
        "the first floor as float32 zeros (dtype=None): torch.maximum with the float64 lower bounds "
        "promotes it to float64 at once, and 0 is exact in both",
    "empirical.measure.heads.x__measure_layer__mutmut_168":
        "the first floor as float32 zeros (dtype dropped): torch.maximum with the float64 lower "
        "bounds promotes it to float64 at once, and 0 is exact in both",
    "empirical.measure.heads.x__measure_layer__mutmut_263":
        "prune the candidate rows at ≥ 4096 instead of > 4096: pruning keeps the rows whose upper "
        "bound reaches the floor so far, and _merge prunes every chunk again against the final "
        "floor, which is never lower; when the intermediate pruning happens changes the work, not "
        "the rows certified",
    "empirical.measure.heads.x__measure_layer__mutmut_264":
        "prune the candidate rows above 4097 instead of 4096: pruning keeps the rows whose upper "
        "bound reaches the floor so far, and _merge prunes every chunk again against the final "
        "floor, which is never lower; when the intermediate pruning happens changes the work, not "
        "the rows certified",
    "empirical.measure.heads.x__finish__mutmut_17":
        "`... and paper_split is not None` → `... or paper_split is not None`: the paper's sums "
        "exist exactly when with_paper is set (measure_heads runs the 1000·θ pass iff paper), so "
        "the condition has the same value",
    "empirical.measure.heads.x__finish__mutmut_18":
        "`with_paper and paper_n is not None and ...` → `... or paper_n2 is not None and ...`: the "
        "paper's sums exist exactly when with_paper is set, so the condition has the same value",
    "empirical.measure.heads.x__finish__mutmut_19":
        "`with_paper and ...` → `with_paper or ...`: the paper's sums exist exactly when with_paper "
        "is set, so the condition has the same value",
    "empirical.measure.heads.x_measure_heads__mutmut_56":
        "layers = heads = None instead of 0: without batches `not layers` raises the same error, "
        "and the first batch overwrites both",
    "empirical.measure.heads.x__measure_layer__mutmut_123":
        "n / n_allowed.clamp_min(2) instead of clamp_min(1): a measured row has at least two "
        "allowed keys, so the clamp acts only on rows left out of the sums",
    "empirical.measure.heads.x_head_atlas__mutmut_8":
        "getattr(config, 'is_encoder_decoder', None) instead of False: `if None:` and `if False:` "
        "both let the model through",
    "empirical.measure.heads.x_measure_heads__mutmut_104":
        "real.cumsum(+1) instead of cumsum(-1): the real-position mask is 2-d (batch, positions), "
        "where dimension 1 is the last",
    "empirical.measure.heads.x_measure_heads__mutmut_143":
        "real.shape[+1] instead of shape[-1] for the causal mask's width: the real-position mask is "
        "2-d (batch, positions), where dimension 1 is the last",
    "empirical.measure.heads.x_measure_heads__mutmut_111":
        "real.sum(+1, keepdim=True) instead of sum(-1, ...): the real-position mask is 2-d (batch, "
        "positions), where dimension 1 is the last",
    "homogeneity.analysis.xǁDegreeInterpreterǁ_degree__mutmut_18":
        "a rule also looked up for call_module/call_method nodes: their targets are strings, and "
        "the rule table is keyed by aten operators, so the lookup finds nothing either way",
    "homogeneity.report.x__module_summaries__mutmut_26":
        "a module's class name as .rsplit('.')[-1] instead of .rsplit('.', 1)[-1]: whatever the "
        "number of splits, the last piece is the text after the last dot",
    "homogeneity.report.x__module_summaries__mutmut_38":
        "a module's class name as .rsplit('.', 2)[-1] instead of .rsplit('.', 1)[-1]: whatever the "
        "number of splits, the last piece is the text after the last dot",
    "saturated.saturate.x__undetermined_entries__mutmut_9":
        "_batch_axis(candidates, shape, count, None) instead of total: total is not None on that "
        "line, so count differs from None exactly as it differs from total where count < total, "
        "and where count == total the output is of every entry, each candidate dimension has the "
        "batch's size and the filter by size keeps them all",
    "saturated.saturate.xǁSaturatedModelǁ__call____mutmut_22":
        "pairs starts as None instead of []: it is assigned (pairs = found) by the first level that "
        "computes outputs, and read (merged into, returned) only after one did",
    "saturated.saturate.xǁSaturatedModelǁ__call____mutmut_157":
        "_merge(..., batch or 2) where a sub-batch raised at the last level: a sub-batch (pending "
        "not None) exists only after _undetermined_entries named some entries, which needs "
        "total = batch not None (an int ≥ 2, see _batch_size), so batch or 2 is batch",
    "saturated.saturate.xǁSaturatedModelǁ__call____mutmut_172":
        "_merge(..., batch or 2) for a recomputed sub-batch: pending is not None only after "
        "_undetermined_entries named some entries, which needs total = batch not None (an int ≥ 2, "
        "see _batch_size), so batch or 2 is batch",
    "saturated.saturate.xǁSaturatedModelǁ__call____mutmut_191":
        "final NaN masked with 1.0 instead of 0.0: the masked values are only tested for NaN (any, "
        "and the NaN of each entry's sum of finite normalized values, where adding 1.0 instead of "
        "0.0 can neither make nor remove a NaN or an overflow), so any finite fill marks the same",
    "saturated.saturate.xǁSaturatedModelǁ__call____mutmut_206":
        "count (batch or 2) instead of (batch or 1) where batch is None: _undetermined_entries is "
        "then called with total None, where every output gives no batch axis (None) and an empty "
        "list gives [], whatever the count",
    "saturated.saturate.x__batch_shape__mutmut_8":
        "_batch_axis(candidates, shape, 1, None) instead of total: _batch_shape returns early for "
        "total == 1, so count 1 differs from total either way and the candidates are filtered "
        "alike; the error message reads total itself",
    "saturated.saturate.x__exactly_zero__mutmut_14":
        "`and` → `or` in the assert that index and partials exist: settles_exactly, checked just "
        "before, returns True only when both are set, so the assert holds either way",
    "saturated.saturate.x__check_masks__mutmut_11":
        "any(dim=+1) instead of -1: only 2-D masks reach the line, where dimension 1 is the last",
    "saturated.saturate.x__final__mutmut_18":
        "any(-1, keepdim=True).expand(shape) also for a 0-dim part: torch reduces a 0-dim "
        "tensor over dim -1 to itself, so the result is the same 0-dim mask",
    "saturated.saturate.x__merge__mutmut_8":
        "`degree is None or part_degree is None` → `and`: both come from normalizing the same "
        "output of the same graph, where a degree is None exactly for a non-tensor output (which "
        "the isinstance test skips already), so one None never comes without the other",
    "saturated.saturate.x__merge__mutmut_9":
        "`not isinstance(value, Tensor) and degree is None` instead of `or`: a degree is None "
        "exactly for a non-tensor output, on both sides of the merge, so the test skips the same "
        "outputs",
    "saturated.saturate.x__normalized__mutmut_8":
        "nan_to_num(None, ...) instead of 0.0: None is nan_to_num's own default, NaN → 0",
    "saturated.saturate.x__normalized__mutmut_14":
        "NaN counted as 1.0 instead of 0.0 in the size of a part that holds NaN: that size is "
        "read only by isfinite/isinf (the zero tests are skipped for a part with NaN, as NaN is "
        "never within its bound), and 1.0 and 0.0 are both finite",
    "saturated.saturate.x__normalized__mutmut_15":
        "nan_to_num(..., neginf=+inf) instead of -inf: the size is a largest magnitude, |±inf| = inf",
    "saturated.saturate.x__normalized__mutmut_79":
        "the per-vector test also for a 0-dim part: its one vector is the whole part, and a part "
        "whose every coefficient is within its bound was handled (continue or raise) above",
    "saturated.saturate.x__normalized__mutmut_80":
        "the per-vector test skipped for a 1-D part: its one vector is the whole part, and a part "
        "whose every coefficient is within its bound was handled (continue or raise) above",
    "saturated.saturate.x__placement__mutmut_8":
        "_batch_axis(candidates, part, count, None): the candidates are also filtered by size "
        "when count == total, where the part is an output of every entry and each candidate "
        "dimension has the batch's size, so the filter keeps them all",
    "saturated.saturate.xǁSaturatedModelǁ_one_at_a_time__mutmut_4":
        "range(count or 2) for inputs without a batch: both passes run the same inputs (count is "
        "None, so nothing is selected), the first result is the one returned and the error "
        "message is the same",
    "saturated.saturate.xǁSaturatedModelǁ_one_at_a_time__mutmut_35":
        "known[1] instead of known[0] where count is None: that return is never reached, as the "
        "call reaches _one_at_a_time without a batch only after the same pass (same inputs, "
        "settings, dtype and lenient normalization) raised NeedsOrders, so the pass here raises "
        "too and no entry is known",
    "saturated.saturate.xǁSaturatedModelǁ_one_at_a_time__mutmut_70":
        "a floating output's placeholder for the batch filled with 0 instead of NaN: every entry is "
        "then merged into it (its values, or NaN where its pass failed), each row written once, and "
        "a higher degree zeroes the rows written before either way, so no placeholder value is read",
    "saturated.saturate.xǁSaturatedModelǁ_one_at_a_time__mutmut_72":
        "an integer output's placeholder for the batch filled with 1 instead of 0: it is built only "
        "when every entry's pass went through, and each entry's row is then written over it",
    "saturated.saturate.xǁSaturatedModelǁ__init____mutmut_55":
        "the wide dtype always float64: it is float64 for every floating dtype anyway (float16, "
        "bfloat16 and float32 have a larger eps, float64 itself is float64)",
    "saturated.saturate.xǁSaturatedModelǁ__init____mutmut_57":
        "eps > float64's eps → >=: equal only for float64 itself, whose wide dtype is float64 "
        "either way",
    "homogeneity.verify.asymptotic.x__approximate__mutmut_13":
        "polynomials other than c itself go to the Add/Mul/Pow branches instead of Series.of: those "
        "rebuild the same exact series (Series.make sums and drops zeros as Poly does) with every "
        "rate None; only the cache then also holds the sub-terms",
    "homogeneity.verify.asymptotic.x__approximate__mutmut_82":
        "`_sign(value) > 0` → `>= 0`: _sign returns 1 or -1 (or raises), never 0",
    "homogeneity.verify.asymptotic.x__approximate__mutmut_86":
        "passes None as _saturating's `value`, a parameter _saturating never reads",
    "homogeneity.verify.asymptotic.x__approximate__mutmut_127":
        "passes None as _saturating's `value`, a parameter _saturating never reads",
    "homogeneity.verify.asymptotic.x__approximate__mutmut_180":
        "the sign for an argument exactly 0 (value None) → 1: that argument's main part has no term "
        "to multiply, so the product is the empty series either way",
    "homogeneity.verify.asymptotic.x__argument__mutmut_7":
        "the power returned with value None → 1: every caller reads the power only when value is not "
        "None (exp, tanh/erf and _power test `value is None` first; Abs ignores it)",
    "homogeneity.verify.asymptotic.x__power__mutmut_24":
        "getattr(term, 'args', ()) → default None: every sympy expression has .args, the default is "
        "never used",
    "homogeneity.verify.asymptotic.x__power__mutmut_27":
        "getattr(term, 'args', ()) → getattr(term, 'args'): every sympy expression has .args, the "
        "default is never used",
    "homogeneity.verify.asymptotic.x__power__mutmut_44":
        "`_sign(value) > 0` → `>= 0`: _sign returns 1 or -1 (or raises), never 0",
    "homogeneity.verify.asymptotic.xǁSeriesǁpower__mutmut_23":
        "`_sign(value) < 0` → `<= 0`: _sign returns 1 or -1 (or raises), never 0",
    "homogeneity.verify.asymptotic.xǁSeriesǁpower__mutmut_24":
        "`_sign(value) < 0` → `< 1`: _sign returns 1 or -1 (or raises), and only -1 is below either",
    "homogeneity.verify.asymptotic.xǁSeriesǁpower__mutmut_56":
        "`assert gap is not None and gap > 0` → `or`: gap is never None there (a rest that is not "
        "exactly 0 has a term or an order) and always > 0, so both asserts pass",
    "homogeneity.verify.asymptotic.xǁSeriesǁpower__mutmut_58":
        "`gap > 0` → `gap >= 0` in an assert: gap is a later exponent (or the order) minus the first "
        "exponent, always > 0",
    "homogeneity.verify.asymptotic.xǁSeriesǁpower__mutmut_70":
        "the binomial sum starts exact instead of O(t^keep): each addition takes the smaller order "
        "(keep, from the capped term), and the result is re-made with order keep anyway",
    "homogeneity.verify.asymptotic.xǁSeriesǁpower__mutmut_79":
        "the first power of the rest starts exact instead of O(t^keep): the loop re-makes it with "
        "order keep before it is used",
    "homogeneity.verify.asymptotic.xǁSeriesǁpower__mutmut_102":
        "one more binomial term, j = ⌊keep/gap⌋ + 1: its powers are ≥ j·gap > keep, all dropped by "
        "the truncation to keep, so it adds nothing",
    "homogeneity.verify.asymptotic.xǁSeriesǁpower__mutmut_112":
        "the power of the rest made exact instead of O(t^keep) before multiplying: its terms are "
        "already below keep and the product's order is capped at keep on the next line (an exactly 0 "
        "term then stays 0, which adds nothing to a sum of order keep)",
    "homogeneity.verify.asymptotic.xǁSeriesǁpower__mutmut_117":
        "the power of the rest left without the cap at keep: the sum it is added to has order keep "
        "and drops the terms past it, and the next step re-makes it with order keep",
    "homogeneity.verify.asymptotic.xǁSeriesǁpower__mutmut_120":
        "_min(term.order, keep) → _min(None, keep) = keep: the product's order is already ≥ keep "
        "(keep + the rest's valuation, or the rest's order ≥ keep plus a valuation ≥ 0)",
    "homogeneity.verify.asymptotic.xǁSeriesǁpower__mutmut_121":
        "_min(term.order, keep) → term.order (≥ keep): the sum it is added to has order keep and "
        "drops the terms past it, and the next step re-makes it with order keep",
    "homogeneity.verify.asymptotic.xǁSeriesǁpower__mutmut_127":
        "the binomial term added exact instead of O(t^term.order): the running sum already has order "
        "keep ≤ term.order, and its terms are below keep",
    "homogeneity.verify.formal.x__evaluate__mutmut_42":
        "rms_norm's eps looked up in args[3:5] instead of args[3:4]: rms_norm takes at most four "
        "arguments (input, normalized_shape, weight, eps), so both slices hold the eps or nothing",
    "homogeneity.verify.formal.x__evaluate__mutmut_46":
        "the padded rms_norm arguments keep args[:4] instead of args[:3]: the padding runs only when "
        "eps is absent or None, and torch.export drops a trailing default argument (the node is "
        "rms_norm(x, shape) or rms_norm(x, shape, weight)), so args has at most three entries",
    "homogeneity.verify.formal.x__evaluate__mutmut_37":
        "kwargs' nodes mapped to None: only a Node among the kwargs changes, and every tensor "
        "argument of the ops in SYMBOLIC_OPS is positional in its aten schema (their keyword-only "
        "arguments are scalars: alpha, beta, approximate, dtype), so torch.export puts every node "
        "in args",
    "homogeneity.verify.formal.x__evaluate__mutmut_56":
        "np.asarray(op result, dtype=None): every op returns an object array, or from a sum over "
        "every axis a sympy expression (stored as object by numpy too) or, over an empty array, the "
        "int 0, kept as an int64 0-d array, which enters sympy as the same exact 0",
    "homogeneity.verify.formal.x__evaluate__mutmut_58":
        "np.asarray(op result) without dtype: every op returns an object array, or from a sum over "
        "every axis a sympy expression (stored as object by numpy too) or, over an empty array, the "
        "int 0, kept as an int64 0-d array, which enters sympy as the same exact 0",
    "homogeneity.verify.formal.x__grade_proof__mutmut_7":
        "the shared cache None: approximate(..., None) makes a fresh cache per output entry; the "
        "cache only maps an expression to its own approximation, so only shared work is lost",
    "homogeneity.verify.formal.x__grade_proof__mutmut_10":
        "approximate(..., cache=None) makes a fresh cache per output entry: the cache only maps an "
        "expression to its own approximation, so only shared work is lost",
    "homogeneity.verify.formal.x__grade_proof__mutmut_12":
        "approximate(...) without the shared cache makes a fresh one per output entry: the cache only"
        " maps an expression to its own approximation, so only shared work is lost",
    "homogeneity.verify.formal.x__layer_norm__mutmut_1":
        "layer_norm's default eps 1e-5 → 1.00001: torch.export writes the eps into every layer_norm "
        "node (F.layer_norm passes it positionally), so the default is never read",
    "homogeneity.verify.formal.x__limit_and_rest__mutmut_7":
        "oo·sign(a) → oo/sign(a) for the leading coefficient a: a is nonzero, its sign ±1, and oo/±1 "
        "= oo·±1",
    "homogeneity.verify.formal.x__normalize__mutmut_9":
        "sympy.evaluate(None) instead of False: every reader of sympy's global evaluate flag tests "
        "its truth (Add, Mul, Pow, functions: `if not evaluate`, `if evaluate`), so None builds the "
        "same unevaluated terms as False",
    "homogeneity.verify.formal.x__rationals__mutmut_6":
        "np.array(rationals, dtype=None): numpy stores sympy numbers as object anyway; only a size-0 "
        "tensor differs (float64, no entry); a sum over it gives 0.0 for 0, and sympy drops it "
        "(x + 0.0 = x): outputs, limits and residuals are the same",
    "homogeneity.verify.formal.x__rationals__mutmut_8":
        "np.array(rationals) without dtype: numpy stores sympy numbers as object anyway; only a "
        "size-0 tensor differs (float64, no entry); a sum over it gives 0.0 for 0, and sympy drops "
        "it (x + 0.0 = x): outputs, limits and residuals are the same",
    "homogeneity.verify.formal.x__rms_norm__mutmut_9":
        "centre=False → centre=None for RMSNorm: _normalized only tests `if centre`, and None is "
        "falsy like False",
    "homogeneity.verify.formal.x__rms_norm__mutmut_2":
        "eps=None → the float32 eps is never chosen: _evaluate replaces an rms_norm eps of None by "
        "the input dtype's eps before calling _rms_norm, which never sees None",
    "homogeneity.verify.formal.x__rms_norm__mutmut_4":
        "torch.finfo(None) for eps=None: _evaluate replaces an rms_norm eps of None by the input "
        "dtype's eps before calling _rms_norm, which never sees None",
    "homogeneity.verify.formal.x__symbols__mutmut_12":
        "np.array(symbols, dtype=None): numpy stores sympy symbols as object anyway; only a size-0 "
        "placeholder differs (float64, no entry); a sum over it gives 0.0 for 0, and sympy drops it "
        "(x + 0.0 = x), so every residual is the same",
    "homogeneity.verify.formal.x__symbols__mutmut_14":
        "np.array(symbols) without dtype: numpy stores sympy symbols as object anyway; only a size-0 "
        "placeholder differs (float64, no entry); a sum over it gives 0.0 for 0, and sympy drops it "
        "(x + 0.0 = x), so every residual is the same",
    "homogeneity.verify.formal.x__times__mutmut_1":
        "an alpha or beta of 1 also multiplied in, as the exact Rational 1: sympy returns 1·e as e "
        "itself, so every entry is the same expression (only the work changes)",
    "homogeneity.verify.formal.x_prove__mutmut_150":
        "_first_nonzero(..., simplify=None): None is falsy, so it expands as with simplify=False",
    "empirical.models.formats.x_load_weights__mutmut_41":
        "load_state_dict(strict=None): torch only tests `if strict:` (and passes it on to the same "
        "tests), so None is False",
    "empirical.outputs.x_write_text__mutmut_7":
        "write_text(encoding='UTF-8'): codec names are looked up case-insensitively, the same codec",
    "empirical.outputs.x_write_json__mutmut_6":
        "json.dumps(allow_nan=None) with indent=2: the pure-Python encoder raises on NaN and "
        "infinity under `if not allow_nan`, so None refuses them as False does",
    "empirical.outputs.x_save_figure__mutmut_10":
        "savefig(format='PDF') for 'pdf': matplotlib's print_figure lowercases the format first",
    "empirical.outputs.x_save_figure__mutmut_15":
        "savefig(format='PNG') for a path without extension: matplotlib's print_figure lowercases "
        "the format first",
    "empirical.measure.reference.x_one_at_a_time_similarity__mutmut_5":
        "getattr(config, 'is_encoder_decoder', None) instead of False: a config without the "
        "attribute (or no config) gives None, as falsy as False, and the value only decides an if",
    "empirical.measure.reference.x_one_at_a_time_similarity__mutmut_33":
        "tokenizer(..., truncation=None, max_length=max_length): transformers' tokenizers given a "
        "max_length with truncation None (and no padding) switch to 'longest_first', which for "
        "one sentence is what truncation=True means",
    "empirical.measure.reference.x_one_at_a_time_similarity__mutmut_37":
        "tokenizer(...) without truncation=True: its default is None, and transformers' tokenizers "
        "given a max_length with truncation None (and no padding) switch to 'longest_first', "
        "which for one sentence is what truncation=True means",
    "empirical.measure.reference.x_one_at_a_time_similarity__mutmut_74":
        "cosine_similarity(a[0], b[0]) without dim=-1 (its default is dim=1): a hidden state is "
        "(batch, tokens, d), so a[0] is 2-D and dimension 1 is the last",
    "empirical.measure.reference.x_one_at_a_time_similarity__mutmut_77":
        "cosine_similarity(..., dim=+1) instead of -1: a[0] of a (batch, tokens, d) hidden state is "
        "2-D, where dimension 1 is the last",
    "saturated.compare.x_compare_layers__mutmut_92":
        "cosine_similarity(a[keep], b[keep]) without dim=-1 (its default is dim=1): keep has the "
        "layers' full shape without the last dimension, so a[keep] is always 2-D (positions, d), "
        "where dimension 1 is the last",
    "saturated.compare.x_compare_layers__mutmut_93":
        "cosine_similarity(..., dim=+1) instead of -1: a[keep] is always 2-D (positions, d), keep "
        "having the layers' full shape without the last dimension",
    "saturated.compare.x_compare_layers__mutmut_103":
        "argmax(dim=+1) instead of -1: t[keep] is always 2-D (positions, classes), keep having the "
        "logits' full shape without the last dimension",
    "saturated.modules.xǁHardAttentionǁexact__mutmut_25":
        "the scores' sum starts from the int 0 instead of Fraction(0): each score is only compared "
        "with the row's others and their max, and 0 + a Fraction is that Fraction (an empty sum, "
        "0, compares as Fraction(0))",
    "saturated.modules.xǁHardAttentionǁexact__mutmut_32":
        "the scores' sum starts from Fraction(1) instead of Fraction(0): every score of a row is "
        "one larger, so the row's maximum is reached at the same positions",
    "saturated.modules.xǁHardAttentionǁexact__mutmut_42":
        "the winners' values sum from the int 0 instead of Fraction(0): there is at least one "
        "winner and every value is a Fraction (a non-empty sum from _matmul, which refuses rows "
        "of another width than the weights'), so the sum is the same Fraction",
    "saturated.modules.x__matmul__mutmut_7":
        "the products' sum starts from the int 0 instead of Fraction(0): every entry of both "
        "factors is a Fraction (from _rational) and a row of a has as many entries as b has rows "
        "(checked just before), so each sum is of at least one Fraction, or there is no column",
    "saturated.modules.xǁHardAttentionǁsoftmax_at__mutmut_30":
        "float('-INF') instead of float('-inf'): Python reads infinity case-insensitively, both "
        "are -inf",
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


def exit_codes(root: Path) -> dict[str, dict[str, int | None]]:
    """Per module with mutants (its path below ``root``): each mutant's exit code, None if not run."""
    results = {}
    for meta in sorted(root.rglob("*.py.meta")):
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        if codes:
            results[str(meta.relative_to(root).with_suffix(""))] = codes
    return results


def module_scores(results: dict[str, dict[str, int | None]]) -> dict[str, tuple[Counter[str], list[str]]]:
    """Per module of :func:`exit_codes`' ``results``: counts by status and the surviving mutants' names."""
    scores: dict[str, tuple[Counter[str], list[str]]] = {}
    for module, codes in results.items():
        counts: Counter[str] = Counter()
        survivors = []
        for name, code in codes.items():
            status = _status(name, code)
            counts[status] += 1
            if status in ("survived", "no tests", "suspicious", "timeout"):
                survivors.append(name)
        scores[module] = (counts, sorted(survivors))
    return scores


def killed_equivalents(results: dict[str, dict[str, int | None]]) -> list[str]:
    """The ``EQUIVALENT`` keys whose mutant a test killed. A killed mutant is not equivalent: its
    function changed, so the key's number now names another mutant, or its reason is wrong."""
    return sorted(name for codes in results.values() for name, code in codes.items()
                  if name in EQUIVALENT and code in _KILLED)


def wilson_interval(killed: int, checked: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval (95% by default) for a proportion of ``killed`` in ``checked``.

    >>> [round(100 * x, 1) for x in wilson_interval(36, 36)]
    [90.4, 100.0]
    """
    if checked == 0:
        return 0.0, 1.0
    p = killed / checked
    centre = (p + z * z / (2 * checked)) / (1 + z * z / checked)
    half = z * math.sqrt(p * (1 - p) / checked + z * z / (4 * checked * checked)) / (1 + z * z / checked)
    return max(0.0, centre - half), min(1.0, centre + half)


def sample(root: Path, size: int, seed: int, modules: Sequence[str] = ()) -> list[str]:
    """``size`` mutant names of each module (all of a module's if it has fewer), drawn at random
    with ``seed``: the same names for the same seed and the same mutants, whatever else changed."""
    names: list[str] = []
    for meta in sorted(root.rglob("*.py.meta")):
        module = str(meta.relative_to(root).with_suffix(""))
        if modules and module not in modules:
            continue
        keys = sorted(json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"])
        names += random.Random(f"{seed}:{module}").sample(keys, min(size, len(keys)))
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=Path, default=Path("mutants"),
                        help="the directory mutmut run writes (default: mutants)")
    parser.add_argument("--survivors", action="store_true", help="list every surviving mutant")
    parser.add_argument("--fail-under", type=float, default=None,
                        help="exit with status 1 if a checked module scores below this percentage")
    parser.add_argument("--sample", type=int, default=None, metavar="N",
                        help="print N randomly chosen mutant names per module (to pass to mutmut run)")
    parser.add_argument("--seed", type=int, default=13, help="seed of --sample (default: 13)")
    parser.add_argument("modules", nargs="*", help="with --sample: only these modules "
                        "(paths as shown in the table, e.g. saturated/ties.py)")
    args = parser.parse_args(argv)
    if args.sample is not None:
        names = sample(args.mutants, args.sample, args.seed, args.modules)
        if not names:
            print(f"no generated mutants under {args.mutants}/; run `mutmut run` first", file=sys.stderr)
            return 2
        print("\n".join(names))
        return 0
    results = exit_codes(args.mutants)
    scores = module_scores(results)
    if not scores:
        print(f"no mutmut results under {args.mutants}/; run `mutmut run` first", file=sys.stderr)
        return 2
    header = f"{'module':<36} {'total':>6} {'checked':>8} {'killed':>7} {'score':>7} " \
             f"{'95% interval':>14} {'survived':>9} {'no tests':>9} {'timeout':>8} {'equiv.':>7}"
    print(header)
    failing = []
    for module, (counts, _) in scores.items():
        total = sum(counts.values())
        checked = sum(counts[s] for s in ("killed", "survived", "no tests", "suspicious", "timeout"))
        score = 100.0 * counts["killed"] / checked if checked else None
        if score is None:
            shown, interval = "      -", ""
        else:
            shown = f"{score:6.1f}%"
            if checked < total - counts["equivalent"]:  # a sample: the score is an estimate
                low, high = wilson_interval(counts["killed"], checked)
                interval = f"{100 * low:.0f}-{100 * high:.0f}% sample"
            else:
                interval = "all checked"
        print(f"{module:<36} {total:>6} {checked:>8} {counts['killed']:>7} {shown:>7} {interval:>14} "
              f"{counts['survived']:>9} {counts['no tests']:>9} {counts['timeout']:>8} "
              f"{counts['equivalent']:>7}")
        if score is not None and args.fail_under is not None and score < args.fail_under:
            failing.append(module)
    if args.survivors:
        for _, survivors in scores.values():
            for name in survivors:
                print(f"not killed  {name}")
    for name, reason in sorted(EQUIVALENT.items()):
        print(f"equivalent  {name}: {reason}")
    stale = killed_equivalents(results)
    for name in stale:
        print(f"killed, yet listed as equivalent (renumbered by a change, or a wrong reason): {name}",
              file=sys.stderr)
    if failing:
        print(f"below {args.fail_under:g}%: {', '.join(failing)}", file=sys.stderr)
    return 1 if failing or stale else 0


if __name__ == "__main__":
    sys.exit(main())
