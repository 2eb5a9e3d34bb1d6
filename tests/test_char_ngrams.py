"""char_ngrams.py counts a vocabulary's char_wb n-grams a word at a time: the same matrix as scikit-learn's own
``CountVectorizer`` / ``TfidfVectorizer.transform``, entry for entry, on hostile text (Unicode whitespace of every
kind, letters whose lowercase is longer, words shorter than an n-gram, empty documents)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sklearn.feature_extraction.text import CountVectorizer

from pulse_pipeline.modeling.char_ngrams import char_wb_counts, padded_ngrams
from pulse_pipeline.modeling.text import (
    CHAR_MAX_CHARS,
    _tfidf,
    _vectorizer,
    vectorize,
    vectorizers_from,
    vocabulary_table,
)

LETTERS = "abcdefghijklmnopqrstuvwxyz" + "ABCDEFGHIJ" + "ÄÖÜßİıéΣςЖж中文😀" + "0123456789" + ".,;:!?-_/'\"()"
SEPARATORS = [" ", " ", " ", "  ", "\t", "\n", "\r\n", "\xa0", "\u2003", "\u2028", "\x1c", "\x85", "\u200b", " \t "]


def hostile_docs(n: int, seed: int) -> list[str]:
    """Documents of random words (1-12 characters, some shorter than any n-gram) between random whitespace."""
    rnd = random.Random(seed)
    docs = []
    for _ in range(n):
        words = ["".join(rnd.choice(LETTERS) for _ in range(rnd.randint(1, 12))) for _ in range(rnd.randint(0, 40))]
        docs.append(
            "".join(w + rnd.choice(SEPARATORS) for w in words) if rnd.random() > 0.05 else rnd.choice(["", " "])
        )
    return docs


def same_csr(a, b) -> None:
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.shape == b.shape and a.dtype == b.dtype


@pytest.mark.parametrize("ngram_range", [(3, 5), (1, 1), (2, 4)])
def test_a_words_ngrams_are_the_ones_scikit_learn_cuts(ngram_range):
    analyzer = CountVectorizer(analyzer="char_wb", ngram_range=ngram_range, lowercase=False).build_analyzer()
    for word in ["a", "ab", "abc", "abcd", "abcdefgh", "İı", "😀", "ß" * 7]:
        assert padded_ngrams(word, ngram_range) == analyzer(word), word


def test_counts_equal_scikit_learns_on_hostile_text():
    fit_docs = hostile_docs(300, seed=1)
    docs = hostile_docs(400, seed=2)  # other documents: many of their n-grams are not in the vocabulary
    counter = CountVectorizer(analyzer="char_wb", ngram_range=(3, 5), min_df=2, dtype=np.float32).fit(fit_docs)
    expected = counter.transform(docs)
    got = char_wb_counts(docs, counter.vocabulary_, (3, 5))
    assert expected.nnz > 5_000
    same_csr(got, expected)


def test_the_text_models_char_block_is_what_its_vectorizer_gives():
    """``text._tfidf``: counts a word at a time, then 1 + log tf and idf as scikit-learn weights them, for a fitted
    vectorizer and for one rebuilt from the vocabulary table (a kept fit's), whose idf is float64."""
    fit_docs, docs = hostile_docs(300, seed=3), hostile_docs(300, seed=4)
    fitted = _vectorizer("char_wb", (3, 5), 30_000, 2).fit(fit_docs)
    same_csr(_tfidf(fitted, docs), fitted.transform(docs))

    ids = [f"s{i}" for i in range(len(fit_docs))]
    kept = vocabulary_table(vectorize(ids, {sid: [doc] for sid, doc in zip(ids, fit_docs, strict=True)}).vectorizers)

    def rebuilt_char_block():
        return {block: v for block, v, _ in vectorizers_from(kept).blocks}["char"]

    char_docs = [doc[:CHAR_MAX_CHARS] for doc in docs]
    same_csr(_tfidf(rebuilt_char_block(), char_docs), rebuilt_char_block().transform(char_docs))
