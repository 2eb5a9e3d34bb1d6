"""A text model of what users wrote: ridge regression of the stars on TF-IDF of the user's messages.

Why: on real human-rated conversations the tabular features reach an out-of-fold r of ~0.02, because none reads
the words users write; a ridge on TF-IDF of user messages alone reaches ~0.25 (issue 13).

The text of a session is its user messages (the ``message`` actions with source ``user``, the ones
``user_message_count`` counts), each redacted with ``features.redact.redact`` before anything is vectorized, so no
credential or email address can become a term. The last user message is also kept apart: how a conversation ends
("thanks, works now" or "forget it") says much about the rating.

The design matrix Z is the column-wise concatenation of three row-L2-normalized TF-IDF blocks (sublinear tf:
1 + log tf; idf = 1 + log((1 + N) / (1 + df))):

- ``word``: word 1-2 grams of all user messages (``WORD_FEATURES`` at most, in at least ``MIN_DF`` sessions);
- ``char``: ``char_wb`` 2-5 grams of all user messages (robust to typos and inflections; ``CHAR_FEATURES``);
- ``last``: word 1-2 grams of the last user message, times ``LAST_WEIGHT``.

The vocabulary and the idf use no label, so they are fitted once on every session's text, rated or not (an
unsupervised transform, like a scaler fitted on all rows: it cannot carry a rating into a prediction). The
regression uses labels and is cross-fitted: ``nested_text_scores`` gives, for each outer fold k with training rows
T_k, an inner cross-fit score for every row of T_k (its own label never used for its own score) and, for the held-out
rows of fold k and the unrated sessions, the score of a ridge fitted on all of T_k (``crossfit.py`` uses them).

The fitted vocabulary is users' words: it stays in this process and in the warehouse (``modeling.text_terms``),
never in a file, a log line or Dagster metadata beyond counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold

from ..features.redact import redact
from ..warehouse import Warehouse

WORD_FEATURES = 20_000
"""Most word 1-2 grams kept (by corpus frequency): bounds the matrix at paper scale (36 000 sessions)."""
CHAR_FEATURES = 30_000
"""Most character 2-5 grams kept."""
LAST_FEATURES = 10_000
"""Most word 1-2 grams of the last message kept."""
MIN_DF = 2
"""A term must occur in at least this many sessions: a term of one session is noise, or a name."""
LAST_WEIGHT = 0.5
"""Weight of the last-message block relative to the two all-messages blocks (each row of a block has norm 1)."""
RIDGE_ALPHA = 1.0
"""L2 penalty of the ridge regression: with three unit-norm blocks, 1.0 shrinks a term seen in a handful of rated
sessions most of the way to zero."""
INNER_FOLDS = 5
"""Folds of the inner cross-fit that scores the training rows of each outer fold."""
TOP_TERMS = 50
"""Terms per direction (positive, negative) stored in ``modeling.text_terms``."""

USER_TEXT_SQL = """
SELECT s.session_id, list(e.text ORDER BY e.seq) AS messages
FROM staging.sessions s JOIN raw.events e USING (record_key)
WHERE e.kind = 'action' AND e.name = 'message' AND e.source = 'user' AND e.text IS NOT NULL
GROUP BY s.session_id
"""


@dataclass(frozen=True)
class SessionTexts:
    """Redacted user text per session, in the order of ``session_ids``: all messages joined by newlines, and the
    last message alone ("" for a session without user messages)."""

    session_ids: tuple[str, ...]
    all_messages: tuple[str, ...]
    last_message: tuple[str, ...]


def session_texts(session_ids: Sequence[str], messages: dict[str, Sequence[str]]) -> SessionTexts:
    """The redacted texts of ``session_ids`` from their user messages (``messages[session_id]``, in order)."""
    all_text, last = [], []
    for sid in session_ids:
        redacted = [redact(m) for m in messages.get(sid, ())]
        all_text.append("\n".join(redacted))
        last.append(redacted[-1] if redacted else "")
    return SessionTexts(tuple(session_ids), tuple(all_text), tuple(last))


def load_session_texts(wh: Warehouse, session_ids: Sequence[str]) -> SessionTexts:
    """The redacted user text of ``session_ids`` from ``raw.events`` (one query)."""
    rows = wh.con.execute(USER_TEXT_SQL).fetchall()
    return session_texts(session_ids, {sid: msgs for sid, msgs in rows})


@dataclass(frozen=True, eq=False)
class TextMatrix:
    """Z (one row per session of ``texts``, CSR, float32) and each column's ``(block, term)``."""

    Z: sp.csr_matrix
    terms: tuple[tuple[str, str], ...]


def _vectorizer(analyzer: str, ngrams: tuple[int, int], max_features: int, min_df: int) -> TfidfVectorizer:
    return TfidfVectorizer(
        analyzer=analyzer,
        ngram_range=ngrams,
        sublinear_tf=True,
        min_df=min_df,
        max_features=max_features,
        dtype=np.float32,
    )


def vectorize(texts: SessionTexts, min_df: int = MIN_DF) -> TextMatrix | None:
    """The TF-IDF blocks of the module docstring, fitted on every session's text (no label is read).

    None when no term occurs in ``min_df`` sessions (no user text to model)."""
    blocks, terms = [], []
    specs = (
        ("word", "word", (1, 2), WORD_FEATURES, texts.all_messages, 1.0),
        ("char", "char_wb", (2, 5), CHAR_FEATURES, texts.all_messages, 1.0),
        ("last", "word", (1, 2), LAST_FEATURES, texts.last_message, LAST_WEIGHT),
    )
    for block, analyzer, ngrams, max_features, docs, weight in specs:
        vectorizer = _vectorizer(analyzer, ngrams, max_features, min_df)
        try:
            matrix = vectorizer.fit_transform(docs)
        except ValueError:  # empty vocabulary: no term in min_df sessions
            continue
        blocks.append(matrix * np.float32(weight))
        terms.extend((block, str(t)) for t in vectorizer.get_feature_names_out())
    if not blocks:
        return None
    return TextMatrix(sp.hstack(blocks, format="csr", dtype=np.float32), tuple(terms))


def fit_text_regression(Z: sp.spmatrix, y: np.ndarray, alpha: float = RIDGE_ALPHA) -> Ridge:
    """Ridge(alpha) of the stars on Z, with an intercept: argmin_w,b |y - Zw - b|^2 + alpha |w|^2."""
    return Ridge(alpha=alpha).fit(Z, y)


@dataclass(frozen=True, eq=False)
class FoldTextScores:
    """The text scores of one outer fold and which labeled rows (indices into the labeled rows) made each.

    ``train_rows`` (T_k) and ``held_out_rows`` are the outer fold's rows; ``train_scores[j]`` is the inner cross-fit
    score of row ``train_rows[j]``, made by the inner ridge ``inner_fold[j]``, which was fitted on
    ``inner_train[inner_fold[j]]``; ``held_out_scores`` and ``unlabeled_scores`` come from the outer ridge fitted
    on ``outer_train``. Exact cross-fitting: ``outer_train`` has no held-out row and no row of ``train_rows`` is in
    the inner training set of its own inner fold (``text_score_violations``).
    """

    train_rows: np.ndarray
    held_out_rows: np.ndarray
    train_scores: np.ndarray
    held_out_scores: np.ndarray
    unlabeled_scores: np.ndarray
    outer_train: np.ndarray
    inner_fold: np.ndarray
    inner_train: tuple[np.ndarray, ...]

    @property
    def labels_used(self) -> np.ndarray:
        """Every labeled row whose label entered this fold's text scores (outer and inner ridges), sorted."""
        return np.unique(np.concatenate([self.outer_train, *self.inner_train]))


def nested_text_scores(
    Z: sp.spmatrix,
    y: np.ndarray,
    Z_unlabeled: sp.spmatrix,
    k: int,
    seed: int,
    inner_k: int = INNER_FOLDS,
    alpha: float = RIDGE_ALPHA,
) -> tuple[FoldTextScores, ...]:
    """Exact nested cross-fit text scores, one ``FoldTextScores`` per outer fold of
    ``KFold(k, shuffle=True, random_state=seed)`` (the same folds as ``crossfit._fit_folds``).

    Within outer fold k: the training rows T_k are split by ``KFold(min(inner_k, |T_k| // 2), shuffle=True,
    random_state=seed)``, and each gets the score of the ridge fitted on the other inner folds; the held-out rows
    and the unlabeled rows get the score of the ridge fitted on all of T_k. So no score of a row, and no prediction
    of a model trained on these scores, depends on the row's own label, and a held-out row's depends only on labels
    outside its outer fold.
    """
    y = np.asarray(y, dtype=np.float64)
    folds = []
    for train, test in KFold(n_splits=k, shuffle=True, random_state=seed).split(np.zeros(y.shape[0])):
        outer = fit_text_regression(Z[train], y[train], alpha)
        unlabeled = outer.predict(Z_unlabeled) if Z_unlabeled.shape[0] else np.empty(0)
        inner_scores = np.empty(train.shape[0])
        inner_fold = np.empty(train.shape[0], dtype=np.int64)
        inner_train = []
        splitter = KFold(n_splits=max(2, min(inner_k, train.shape[0] // 2)), shuffle=True, random_state=seed)
        for g, (fit_pos, score_pos) in enumerate(splitter.split(train)):
            inner = fit_text_regression(Z[train[fit_pos]], y[train[fit_pos]], alpha)
            inner_scores[score_pos] = inner.predict(Z[train[score_pos]])
            inner_fold[score_pos] = g
            inner_train.append(train[fit_pos])
        folds.append(
            FoldTextScores(
                train, test, inner_scores, outer.predict(Z[test]), unlabeled, train, inner_fold, tuple(inner_train)
            )
        )
    return tuple(folds)


def text_score_violations(folds: Sequence[FoldTextScores]) -> int:
    """Training rows whose text score came from an inner ridge fitted on their own label:
    sum over outer folds k of #{j in T_k : j in inner_train[inner_fold(j)]}. 0 for exact nested cross-fitting.

    (A held-out row whose outer ridge saw its label is counted by ``crossfit.oof_violations``, which gets every
    label a fold's text scores used through ``CrossFit.train_index_by_fold``.)"""
    violations = 0
    for fold in folds:
        for g, trained in enumerate(fold.inner_train):
            violations += int(np.count_nonzero(np.isin(fold.train_rows[fold.inner_fold == g], trained)))
    return violations


@dataclass(eq=False)
class TextFeature:
    """The text of the labeled and unlabeled sessions as TF-IDF rows, and the nested scores computed so far.

    ``scores(y, k, seed)`` computes ``nested_text_scores`` once per (labels, k, seed) and then returns the same
    folds: every family cross-validated with seed s shares one set of text scores. ``labeled`` rows follow the
    labeled rows given to ``crossfit``; ``unlabeled`` rows the unlabeled ones.
    """

    labeled: sp.csr_matrix
    unlabeled: sp.csr_matrix
    inner_k: int = INNER_FOLDS
    alpha: float = RIDGE_ALPHA
    _cache: dict[tuple[bytes, int, int], tuple[FoldTextScores, ...]] = field(default_factory=dict, repr=False)

    def scores(self, y: np.ndarray, k: int, seed: int) -> tuple[FoldTextScores, ...]:
        y = np.asarray(y, dtype=np.float64)
        if y.shape[0] != self.labeled.shape[0]:
            raise ValueError(f"the text has {self.labeled.shape[0]} labeled rows but y has {y.shape[0]} labels")
        key = (y.tobytes(), k, seed)
        if key not in self._cache:
            self._cache[key] = nested_text_scores(
                self.labeled, y, self.unlabeled, k, seed, inner_k=self.inner_k, alpha=self.alpha
            )
        return self._cache[key]


@dataclass(frozen=True)
class TextTerm:
    """One row of ``modeling.text_terms``: a term of the ridge fitted on every label, for explanation only."""

    term: str
    block: str  # word, char or last
    coefficient: float  # stars per unit of TF-IDF weight
    direction: str  # positive or negative
    rank: int  # 1 = the largest |coefficient| in its direction


def top_terms(matrix: TextMatrix, Z_labeled: sp.spmatrix, y: np.ndarray, n: int = TOP_TERMS) -> list[TextTerm]:
    """The ``n`` most positive and ``n`` most negative coefficients of a ridge fitted on ALL labeled rows.

    For explanation only: this fit saw every label, so it never makes a prediction."""
    coef = fit_text_regression(Z_labeled, np.asarray(y, dtype=np.float64)).coef_
    order = np.argsort(-coef, kind="stable")
    rows = []
    for direction, picks in (("positive", order[:n]), ("negative", order[::-1][:n])):
        chosen = [i for i in picks if (coef[i] > 0 if direction == "positive" else coef[i] < 0)]
        for rank, i in enumerate(chosen, start=1):
            block, term = matrix.terms[i]
            rows.append(TextTerm(term, block, float(coef[i]), direction, rank))
    return rows
