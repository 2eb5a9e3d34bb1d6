"""Counting a fitted vocabulary's ``char_wb`` n-grams a word at a time: the text model's costliest step, made cheaper.

scikit-learn's ``char_wb`` analyzer lowercases a document, splits it on whitespace, pads each word with a space on
either side and cuts the padded word into n-grams; ``transform`` then looks each n-gram up in the vocabulary. That
is ~3 000 string slices and dictionary lookups for a session's 1 000 characters, in Python, and it was ~60 % of the
time the unrated sessions' text took (1.58 of 2.53 s per 5 000 sessions at the paper's scale). An n-gram never
spans two words, so a document's counts are the sum of its words' counts, and words repeat: ``char_wb_counts``
counts each document's words, cuts and looks up each distinct word's n-grams once, and multiplies the two count
matrices in C (1.57 s -> 0.23 s for those 5 000 sessions). The counts are the ones scikit-learn's
``CountVectorizer.transform`` gives, entry for entry: ``tests/test_char_ngrams.py`` compares the two on hostile
text, and ``tests/test_text_model.py`` a transform's rows with the vocabulary's own ``fit_transform`` rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

_WHITE_SPACES = re.compile(r"\s\s+")  # scikit-learn's own normalization before the split (``_VectorizerMixin``)


def padded_ngrams(word: str, ngram_range: tuple[int, int]) -> list[str]:
    """The ``char_wb`` n-grams of one word, as scikit-learn cuts them: the word padded with a space on either
    side, every n-gram of each length in ``ngram_range``; a padded word of n characters or fewer is one n-gram,
    itself, and no longer ones are cut from it."""
    low, high = ngram_range
    padded = f" {word} "
    grams = []
    for n in range(low, high + 1):
        grams.extend(padded[start : start + n] for start in range(max(1, len(padded) - n + 1)))
        if len(padded) <= n:  # the whole padded word was the one n-gram: longer ones would repeat it
            break
    return grams


def char_wb_counts(docs: Sequence[str], vocabulary: Mapping[str, int], ngram_range: tuple[int, int]) -> sp.csr_matrix:
    """The count matrix (CSR, float32, a row per document, a column per vocabulary entry, indices sorted) of the
    documents' lowercased ``char_wb`` n-grams that are in ``vocabulary``: what a ``CountVectorizer`` with that
    vocabulary and ``analyzer="char_wb"`` gives them.

    How: the documents' words counted (documents x distinct words), times each distinct word's n-gram counts
    (distinct words x vocabulary); the products are small integers, exact in float32."""
    word_index: dict[str, int] = {}
    words: list[int] = []
    indptr = [0]
    for doc in docs:
        for word in _WHITE_SPACES.sub(" ", doc.lower()).split():
            index = word_index.get(word)
            if index is None:
                index = word_index[word] = len(word_index)
            words.append(index)
        indptr.append(len(words))
    in_docs = _counts(words, indptr, (len(docs), len(word_index)))
    grams: list[int] = []
    word_ptr = [0]
    for word in word_index:
        grams.extend(vocabulary[g] for g in padded_ngrams(word, ngram_range) if g in vocabulary)
        word_ptr.append(len(grams))
    in_words = _counts(grams, word_ptr, (len(word_index), len(vocabulary)))
    counts = (in_docs @ in_words).tocsr()
    counts.sort_indices()
    return counts


def _counts(columns: list[int], indptr: list[int], shape: tuple[int, int]) -> sp.csr_matrix:
    """The CSR matrix counting how often each row's ``columns`` (row i: ``columns[indptr[i]:indptr[i + 1]]``) name
    each column."""
    matrix = sp.csr_matrix(
        (np.ones(len(columns), dtype=np.float32), np.asarray(columns, dtype=np.int32), np.asarray(indptr)), shape=shape
    )
    matrix.sum_duplicates()
    return matrix
