"""load_corpus: the deterministic default corpus and the user's files."""

from __future__ import annotations

import pytest

from empirical.errors import EmpiricalError
from empirical.models.corpus import load_corpus


def test_default_corpus_is_deterministic_english_prose():
    first, second = load_corpus(n=100), load_corpus(n=100)
    assert first.sentences == second.sentences and first.sha256 == second.sha256
    assert len(first) == 100 and len(set(first)) == 100
    for sentence in first:
        words = sentence.split()
        assert 6 <= len(words) <= 40 and sentence[0].isupper() and sentence[-1] in ".!?"
        assert ">>>" not in sentence and "`" not in sentence and "_" not in sentence
    assert load_corpus(n=5).sentences == first.sentences[:5]
    assert first.to_dict()["source"] == "python-stdlib-docstrings"


def test_one_sentence_per_line(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("First sentence here.\nSecond one.\nThird one.\n")
    assert load_corpus(path, n=None).sentences == ("First sentence here.", "Second one.", "Third one.")
    assert load_corpus(path, n=2).sentences == ("First sentence here.", "Second one.")
    spaced = tmp_path / "spaced.txt"
    spaced.write_text("First sentence here.\n\nSecond one.\n\n\nThird one.\n")
    assert load_corpus(spaced, n=None).sentences == load_corpus(path, n=None).sentences


def test_paragraphs_with_comment_lines_like_the_brown_corpus_file(tmp_path):
    path = tmp_path / "brown.txt"
    path.write_text("# ca01 news\nThe Fulton County Grand Jury said\nFriday an investigation.\n\n"
                    "# a comment\nThe jury further said.\n")
    assert load_corpus(path).sentences == (
        "The Fulton County Grand Jury said Friday an investigation.", "The jury further said.")


def test_bad_corpus_input(tmp_path):
    with pytest.raises(EmpiricalError, match="does not exist"):
        load_corpus(tmp_path / "nope.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("# only a comment\n\n")
    with pytest.raises(EmpiricalError, match="empty"):
        load_corpus(empty)
    with pytest.raises(EmpiricalError, match="integer ≥ 1"):
        load_corpus(n=0)
