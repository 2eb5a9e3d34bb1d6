"""A text model of what users wrote: ridge regression of the stars on TF-IDF of the user's messages.

Why: on real human-rated conversations the tabular features reach an out-of-fold r of ~0.02, because none reads
the words users write; a ridge on TF-IDF of user messages alone reaches ~0.25 (issue 13).

The text of a session is its user messages with text (the ``message`` actions with source ``user``, the ones
``user_message_count`` counts), as ``features.user_text`` holds them: redacted there by ``features.redact.redact``
before anything reads them, so no credential or email address can become a term
(``features.user_text.load_user_messages``). The last user message is also kept apart: how a conversation ends
("thanks, works now" or "forget it") says much about the rating.

The design matrix Z is the column-wise concatenation of three row-L2-normalized TF-IDF blocks (sublinear tf:
1 + log tf; idf = 1 + log((1 + N) / (1 + df))):

- ``word``: word 1-2 grams of all user messages (``WORD_FEATURES`` at most, in at least ``MIN_DF`` sessions);
- ``char``: ``char_wb`` 3-5 grams of the first ``CHAR_MAX_CHARS`` characters of all user messages (robust to
  typos and inflections; ``CHAR_FEATURES``);
- ``last``: word 1-2 grams of the last user message, times ``LAST_WEIGHT``.

Shapes (``SHAPES``, ``text_shape``): below ``WORDS_ALONE_BELOW`` ratings the ridge reads the word block alone (the
plain TF-IDF word ridge, the obvious baseline), from there on every block.

The vocabulary and the idf use no label, so they are fitted once on the sessions' text, rated or not (an
unsupervised transform, like a scaler fitted on all rows: it cannot carry a rating into a prediction): on every
rated session and evenly spaced unrated ones up to ``VOCAB_SESSIONS`` (``vocabulary_rows``; building a vocabulary
of 36 000 sessions alone took ~80 s), and the char block reads at most ``CHAR_MAX_CHARS`` characters a session
(character n-grams are made in Python, ~1 000 a session: the costliest step at paper scale). The
regression uses labels and is cross-fitted: ``nested_text_scores`` gives, for each outer fold k with training rows
T_k, an inner cross-fit score for every row of T_k (its own label never used for its own score) and, for the held-out
rows of fold k and the unrated sessions, the score of a ridge fitted on all of T_k (``crossfit.py`` uses them).

The fitted vocabulary is users' words: it stays in this process and in the warehouse (``modeling.text_terms``;
``modeling.text_vocabulary``, from which ``vectorizers_from`` rebuilds the vectorizers of a kept fit, ``reuse.py``),
never in a file, a log line or Dagster metadata beyond counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import Ridge
from sklearn.model_selection import KFold
from sklearn.preprocessing import normalize

from ..settings import usable_cores
from .char_ngrams import char_wb_counts
from .workers import map_jobs, workers_for

WORD_FEATURES = 20_000
"""Most word 1-2 grams kept (by corpus frequency): bounds the matrix at paper scale (36 000 sessions)."""
CHAR_FEATURES = 30_000
"""Most character 3-5 grams kept."""
LAST_FEATURES = 10_000
"""Most word 1-2 grams of the last message kept."""
CHAR_MAX_CHARS = 1_000
"""Characters of a session's text the char block reads (the start: the task as first stated): character n-grams
are the costliest block, and a pasted log would otherwise dominate it."""
VOCAB_SESSIONS = 6_000
"""Sessions the vocabulary and idf are fitted on (``vocabulary_rows``); the rest are only transformed."""
TRANSFORM_MIN_ROWS = 5_000
"""Sessions from which ``vectorize`` transforms in worker processes (``workers.py``): 36 000 took 19 s in one."""
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
SHAPES = ("words", "all")
"""The text model's shapes (``text_shape``): ``words``, the word block alone (the plain TF-IDF word ridge, the
obvious baseline), and ``all``, the three blocks."""
WORDS_ALONE_BELOW = 1_000
"""Below this many labels the text model is the word block alone (``text_shape``)."""


def text_shape(n_labeled: int, word_columns: np.ndarray | None) -> str:
    """``words`` below ``WORDS_ALONE_BELOW`` labels (when the matrix has a word block and others), else ``all``.

    Why a rule and not a choice by inner folds: the char block has up to 30 000 columns and the last-message
    block repeats words the word block already holds; a ridge of fixed alpha spreads a few hundred labels over all
    of them, so the extra blocks add variance faster than signal until there are many labels. A per-fold choice by
    the inner folds' squared error was tried and was worse than either fixed shape on every corpus measured (its
    choice is noisy with a few hundred labels, and folds of different shapes pool into one r): on ConvAI2 at 230
    ratings (three samples) words alone 0.324 / 0.364 / 0.451, every block 0.317 / 0.360 / 0.443, the per-fold
    choice 0.306 / 0.351 / 0.433; on the demo corpus at 230 and 601 ratings words alone 0.391 / 0.380, every block
    0.389 / 0.359, the choice 0.368 / 0.380; on real ratings (issue 37) words alone 0.146 / 0.173 against every
    block's 0.106 / 0.130."""
    return "words" if word_columns is not None and n_labeled < WORDS_ALONE_BELOW else "all"


@dataclass(frozen=True)
class SessionTexts:
    """User text per session, in the order of ``session_ids``: all messages joined by newlines, and the last
    message alone ("" for a session without user messages)."""

    session_ids: tuple[str, ...]
    all_messages: tuple[str, ...]
    last_message: tuple[str, ...]


def session_texts(
    session_ids: Sequence[str], messages: dict[str, Sequence[str]], needed: np.ndarray | None = None
) -> SessionTexts:
    """The texts of ``session_ids`` from their redacted user messages (``messages[session_id]``, in order, as
    ``features.user_text.load_user_messages`` gives them); with ``needed`` (indices), the other sessions get ""
    (they will not be vectorized, so their messages are not joined)."""
    keep = None if needed is None else set(np.asarray(needed).tolist())
    all_text, last = [], []
    for i, sid in enumerate(session_ids):
        said = list(messages.get(sid, ())) if keep is None or i in keep else []
        all_text.append("\n".join(said))
        last.append(said[-1] if said else "")
    return SessionTexts(tuple(session_ids), tuple(all_text), tuple(last))


@dataclass(frozen=True, eq=False)
class TextMatrix:
    """Z (CSR, float32), a row per session listed in ``rows`` (indices into the sessions the texts came from), and
    each column's ``(block, term)``."""

    Z: sp.csr_matrix
    rows: np.ndarray
    terms: tuple[tuple[str, str], ...]
    vectorizers: TextVectorizers | None = None  # what made Z, to transform more sessions with the same columns


@dataclass(frozen=True, eq=False)
class TextVectorizers:
    """The fitted TF-IDF of each block: (block, vectorizer, weight), in column order."""

    blocks: tuple[tuple[str, TfidfVectorizer, float], ...]

    @property
    def terms(self) -> tuple[tuple[str, str], ...]:
        return tuple((block, str(t)) for block, v, _ in self.blocks for t in v.get_feature_names_out())


def _block_docs(texts: SessionTexts, block: str, rows: np.ndarray) -> list[str]:
    source = texts.last_message if block == "last" else texts.all_messages
    limit = CHAR_MAX_CHARS if block == "char" else None
    return [source[i][:limit] for i in rows]


BLOCKS = (("word", "word", (1, 2), WORD_FEATURES, 1.0), ("char", "char_wb", (3, 5), CHAR_FEATURES, 1.0))
BLOCKS += (("last", "word", (1, 2), LAST_FEATURES, LAST_WEIGHT),)
"""(block, analyzer, n-gram range, most terms kept, weight): the blocks of the module docstring."""


def vocabulary_rows(labeled: np.ndarray, max_sessions: int = VOCAB_SESSIONS) -> np.ndarray:
    """The sessions the vocabulary and idf are fitted on: every rated session and evenly spaced unrated ones, up to
    ``max_sessions`` in all (sorted indices). Deterministic, and blind to the ratings' values: it bounds the cost of
    building the vocabulary at paper scale (36 000 sessions) and lets cross-validation vectorize the rated
    sessions alone with the same columns the cross-fit uses for every session."""
    labeled = np.asarray(labeled, dtype=bool)
    rated, unrated = np.flatnonzero(labeled), np.flatnonzero(~labeled)
    room = max(0, max_sessions - rated.size)
    if unrated.size > room:
        unrated = unrated[np.linspace(0, unrated.size - 1, room).astype(np.int64)] if room else unrated[:0]
    return np.sort(np.concatenate([rated, unrated]))


def _vectorizer(analyzer: str, ngrams: tuple[int, int], max_features: int, min_df: int, vocabulary=None):
    """A block's TF-IDF without the row normalization, which ``_unit_rows`` applies (see there)."""
    return TfidfVectorizer(
        analyzer=analyzer,
        ngram_range=ngrams,
        sublinear_tf=True,
        min_df=min_df,
        max_features=max_features,
        dtype=np.float32,
        vocabulary=vocabulary,
        norm=None,
    )


def _unit_rows(Z: sp.csr_matrix) -> sp.csr_matrix:
    """Z's rows scaled to L2 norm 1, each row's terms in column order first (in place).

    Why here and not in the vectorizer: ``fit_transform`` can leave a row's terms out of column order, and the
    norm is summed in storage order, so the same session's row from ``fit_transform`` and from ``transform`` could
    differ in the last bit (and a kept fit's predictions of a copied session with them). Sorted first, both give
    the same row."""
    Z.sort_indices()
    return normalize(Z, norm="l2", copy=False)


def fit_vectorizers(
    texts: SessionTexts, rows: np.ndarray, min_df: int = MIN_DF
) -> tuple[TextVectorizers, sp.csr_matrix] | None:
    """The TF-IDF blocks fitted on the sessions ``rows`` of ``texts`` (no label is read), and Z of those rows: what
    ``transform`` gives them, from each block's ``fit_transform``, so that they are not read a second time (the
    rated sessions' Z, which cross-validation needs, is always among them). A block without a term in ``min_df``
    sessions is left out; None when every block is (no user text to model)."""
    fitted, parts = [], []
    for block, analyzer, ngrams, max_features, weight in BLOCKS:
        vectorizer = _vectorizer(analyzer, ngrams, max_features, min_df)
        try:
            Z = _unit_rows(vectorizer.fit_transform(_block_docs(texts, block, rows)))
        except ValueError:  # empty vocabulary: no term in min_df sessions
            continue
        fitted.append((block, vectorizer, weight))
        parts.append(Z * np.float32(weight))
    if not fitted:
        return None
    return TextVectorizers(tuple(fitted)), sp.hstack(parts, format="csr", dtype=np.float32)


def vocabulary_table(vectorizers: TextVectorizers | None) -> pl.DataFrame:
    """The rows of ``modeling.text_vocabulary``: each block's terms in column order, with their idf."""
    parts = [
        pl.DataFrame(
            {
                "block": block,
                "position": pl.Series(np.arange(len(v.vocabulary_)), dtype=pl.Int32),
                "term": [str(t) for t in v.get_feature_names_out()],
                "idf": v.idf_.astype(np.float64),
            }
        )
        for block, v, _ in ([] if vectorizers is None else vectorizers.blocks)
    ]
    schema = {"block": pl.String, "position": pl.Int32, "term": pl.String, "idf": pl.Float64}
    return pl.concat(parts) if parts else pl.DataFrame(schema=schema)


def vectorizers_from(rows: pl.DataFrame) -> TextVectorizers | None:
    """The fitted vectorizers ``vocabulary_table`` recorded (they transform any text as the originals did: same
    terms, columns and idf); None when there are no rows."""
    fitted = []
    for block, analyzer, ngrams, max_features, weight in BLOCKS:
        terms = rows.filter(pl.col("block") == block).sort("position")
        if not terms.height:
            continue
        vocabulary = {t: i for i, t in enumerate(terms["term"].to_list())}
        vectorizer = _vectorizer(analyzer, ngrams, max_features, MIN_DF, vocabulary)
        vectorizer.idf_ = terms["idf"].to_numpy()
        fitted.append((block, vectorizer, weight))
    return TextVectorizers(tuple(fitted)) if fitted else None


def transform(vectorizers: TextVectorizers, texts: SessionTexts, rows: np.ndarray) -> TextMatrix:
    """Z of the sessions ``rows`` of ``texts``: the weighted blocks side by side (no rows: an empty Z, since
    scikit-learn refuses to transform nothing; a warehouse with no rated session yet has none to cross-validate)."""
    if len(rows) == 0:
        empty = sp.csr_matrix((0, len(vectorizers.terms)), dtype=np.float32)
        return TextMatrix(empty, np.asarray(rows, dtype=np.int64), vectorizers.terms)
    blocks = [_unit_rows(_tfidf(v, _block_docs(texts, b, rows))) * np.float32(w) for b, v, w in vectorizers.blocks]
    return TextMatrix(sp.hstack(blocks, format="csr", dtype=np.float32), np.asarray(rows), vectorizers.terms)


def _tfidf(vectorizer: TfidfVectorizer, docs: list[str]) -> sp.csr_matrix:
    """``vectorizer.transform(docs)``; a ``char_wb`` block's counts made a word at a time (``char_ngrams.py``), then
    weighted as scikit-learn's ``TfidfTransformer.transform`` weights them (1 + log tf, times idf): the same matrix."""
    counted_alike = vectorizer.lowercase and vectorizer.strip_accents is None and vectorizer.preprocessor is None
    if vectorizer.analyzer != "char_wb" or not counted_alike or not vectorizer.sublinear_tf or vectorizer.norm:
        return vectorizer.transform(docs)  # what char_wb_counts does not replicate
    # a vectorizer rebuilt from a kept vocabulary (``vectorizers_from``) holds it as its parameter until it is used
    vocabulary = vectorizer.vocabulary_ if hasattr(vectorizer, "vocabulary_") else vectorizer.vocabulary
    X = char_wb_counts(docs, vocabulary, vectorizer.ngram_range)
    np.log(X.data, X.data)
    X.data += 1.0
    X.data *= vectorizer.idf_[X.indices]
    return X


def vectorize(
    session_ids: Sequence[str],
    messages: dict[str, Sequence[str]],
    labeled: np.ndarray | None = None,
    rated_only: bool = False,
    min_df: int = MIN_DF,
) -> TextMatrix | None:
    """Z of every session of ``session_ids`` (or of the rated ones, ``rated_only``) from its redacted user
    ``messages`` (``features.user_text.load_user_messages``), with the vocabulary and idf fitted on
    ``vocabulary_rows(labeled)`` (every session when ``labeled`` is None). None when there is no user text.

    The vocabulary's sessions (every rated one among them) get the rows its fit made; the others are transformed,
    from ``TRANSFORM_MIN_ROWS`` of them in chunks in worker processes (``workers.py``): Python string work, 36 000
    sessions took 25 s in one process."""
    n = len(session_ids)
    labeled = np.ones(n, dtype=bool) if labeled is None else np.asarray(labeled, dtype=bool)
    vocabulary = vocabulary_rows(labeled)
    fitted = fit_vectorizers(session_texts(session_ids, messages, needed=vocabulary), vocabulary, min_df)
    if fitted is None:
        return None
    vectorizers, Z_fitted = fitted
    rows = np.flatnonzero(labeled) if rated_only else np.arange(n)
    # the rows the vocabulary was fitted on have their Z already (every rated one); the others are transformed
    position = np.minimum(np.searchsorted(vocabulary, rows), vocabulary.size - 1)
    fitted_on = vocabulary[position] == rows
    rest = rows[~fitted_on]
    if not rest.size:
        return TextMatrix(Z_fitted[position], rows, vectorizers.terms, vectorizers)
    Z_rest = transform_messages(vectorizers, [session_ids[i] for i in rest], messages)  # workers when many
    stacked = sp.vstack([Z_fitted[position[fitted_on]], Z_rest], format="csr")
    order = np.argsort(np.concatenate([np.flatnonzero(fitted_on), np.flatnonzero(~fitted_on)]), kind="stable")
    return TextMatrix(stacked[order], rows, vectorizers.terms, vectorizers)


def transform_messages(
    vectorizers: TextVectorizers, session_ids: Sequence[str], messages: dict[str, Sequence[str]]
) -> sp.csr_matrix:
    """Z of ``session_ids`` (a row each, in order) from their redacted user ``messages`` with fitted
    ``vectorizers``, transformed in chunks in worker processes from ``TRANSFORM_MIN_ROWS``."""
    n = len(session_ids)
    workers = workers_for(2 * usable_cores(), n, min_rows=TRANSFORM_MIN_ROWS)
    chunks = np.array_split(np.arange(n), 2 * workers) if workers > 1 else [np.arange(n)]
    jobs = [(vectorizers, [session_ids[i] for i in c], [messages.get(session_ids[i], ()) for i in c]) for c in chunks]
    return sp.vstack(map_jobs(_transform_messages, jobs, workers), format="csr")


def _transform_messages(
    vectorizers: TextVectorizers, session_ids: list[str], messages: list[Sequence[str]]
) -> sp.csr_matrix:
    """One chunk's Z (in a worker): its sessions' messages joined, then transformed."""
    texts = session_texts(session_ids, dict(zip(session_ids, messages, strict=True)))
    return transform(vectorizers, texts, np.arange(len(session_ids))).Z


def fit_text_regression(Z: sp.spmatrix, y: np.ndarray, alpha: float = RIDGE_ALPHA) -> Ridge:
    """Ridge(alpha) of the stars on Z, with an intercept: argmin_w,b |y - Zw - b|^2 + alpha |w|^2."""
    return Ridge(alpha=alpha).fit(Z, y)


@dataclass(frozen=True, eq=False)
class FoldTextScores:
    """The text scores of one outer fold and which labeled rows (indices into the labeled rows) made each.

    ``train_rows`` (T_k) and ``held_out_rows`` are the outer fold's rows; ``train_scores[j]`` is the inner cross-fit
    score of row ``train_rows[j]``, made by the inner ridge ``inner_fold[j]``, which was fitted on
    ``inner_train[inner_fold[j]]``; ``held_out_scores`` and ``unlabeled_scores`` come from the outer ridge fitted
    on ``outer_train`` (``outer_ridge``, kept so unlabeled rows can be scored later: ``with_unlabeled``). Exact
    cross-fitting: ``outer_train`` has no held-out row and no row of ``train_rows`` is in the inner training set of
    its own inner fold (``text_score_violations``).
    """

    train_rows: np.ndarray
    held_out_rows: np.ndarray
    train_scores: np.ndarray
    held_out_scores: np.ndarray
    unlabeled_scores: np.ndarray
    outer_train: np.ndarray
    inner_fold: np.ndarray
    inner_train: tuple[np.ndarray, ...]
    outer_ridge: Ridge | None = None
    shape: str = "all"  # the shape of ``SHAPES`` this fold's ridges have (``text_shape``)

    @property
    def labels_used(self) -> np.ndarray:
        """Every labeled row whose label entered this fold's text scores (outer and inner ridges), sorted."""
        return np.unique(np.concatenate([self.outer_train, *self.inner_train]))

    def with_unlabeled(self, Z_unlabeled: sp.spmatrix) -> FoldTextScores:
        """The same fold with ``unlabeled_scores`` those of ``Z_unlabeled`` by its outer ridge: the scores
        ``nested_text_scores`` gives when the unlabeled rows are passed, for folds cross-validation computed on the
        labeled rows alone (the ridge is the same fit, so the scores are identical)."""
        if self.outer_ridge is None:
            raise ValueError("this fold kept no outer ridge to score unlabeled rows with")
        scores = self.outer_ridge.predict(Z_unlabeled) if Z_unlabeled.shape[0] else np.empty(0)
        return replace(self, unlabeled_scores=scores)


def word_only(Z: sp.spmatrix, word_columns: np.ndarray) -> sp.csr_matrix:
    """Z with every column but ``word_columns`` set to 0: a ridge fitted on it is the word block's ridge, and
    (its other coefficients 0, ``fit_shaped``) predicts any full Z as the word block alone."""
    keep = np.zeros(Z.shape[1], dtype=np.float32)
    keep[np.asarray(word_columns, dtype=np.int64)] = 1.0
    return sp.csr_matrix(Z @ sp.diags(keep, format="csr"), dtype=np.float32)


def fit_shaped(Z: sp.spmatrix, y: np.ndarray, alpha: float, word_columns: np.ndarray | None) -> Ridge:
    """``fit_text_regression`` on Z (already ``word_only`` when ``word_columns`` is given), with the coefficients
    outside ``word_columns`` exactly 0, so that it predicts a full Z as the word block alone."""
    ridge = fit_text_regression(Z, y, alpha)
    if word_columns is not None:
        coef = np.zeros_like(ridge.coef_)
        coef[word_columns] = ridge.coef_[word_columns]
        ridge.coef_ = coef
    return ridge


def nested_text_scores(
    Z: sp.spmatrix,
    y: np.ndarray,
    Z_unlabeled: sp.spmatrix,
    k: int,
    seed: int,
    inner_k: int = INNER_FOLDS,
    alpha: float = RIDGE_ALPHA,
    word_columns: np.ndarray | None = None,
) -> tuple[FoldTextScores, ...]:
    """Exact nested cross-fit text scores, one ``FoldTextScores`` per outer fold of
    ``KFold(k, shuffle=True, random_state=seed)`` (the same folds as ``cv.outer_folds``).

    Within outer fold k: the training rows T_k are split by ``KFold(min(inner_k, |T_k| // 2), shuffle=True,
    random_state=seed)``, and each gets the score of the ridge fitted on the other inner folds; the held-out rows
    and the unlabeled rows get the score of the ridge fitted on all of T_k. So no score of a row, and no prediction
    of a model trained on these scores, depends on the row's own label, and a held-out row's depends only on labels
    outside its outer fold.

    With ``word_columns`` (the word block's columns of Z) the ridges have the shape ``text_shape`` gives for these
    labels: below ``WORDS_ALONE_BELOW`` the word block alone (fitted on ``word_only(Z)``, predicting any full Z).
    """
    y = np.asarray(y, dtype=np.float64)
    shape = text_shape(y.shape[0], word_columns)
    cols = np.asarray(word_columns, dtype=np.int64) if shape == "words" else None
    Z_fit = word_only(Z, cols) if cols is not None else Z
    folds = []
    for train, test in KFold(n_splits=k, shuffle=True, random_state=seed).split(np.zeros(y.shape[0])):
        outer = fit_shaped(Z_fit[train], y[train], alpha, cols)
        unlabeled = outer.predict(Z_unlabeled) if Z_unlabeled.shape[0] else np.empty(0)
        inner_scores = np.empty(train.shape[0])
        inner_fold = np.empty(train.shape[0], dtype=np.int64)
        inner_train = []
        splitter = KFold(n_splits=max(2, min(inner_k, train.shape[0] // 2)), shuffle=True, random_state=seed)
        for g, (fit_pos, score_pos) in enumerate(splitter.split(train)):
            inner = fit_shaped(Z_fit[train[fit_pos]], y[train[fit_pos]], alpha, cols)
            inner_scores[score_pos] = inner.predict(Z_fit[train[score_pos]])
            inner_fold[score_pos] = g
            inner_train.append(train[fit_pos])
        folds.append(
            FoldTextScores(
                train,
                test,
                inner_scores,
                outer.predict(Z_fit[test]),
                unlabeled,
                train,
                inner_fold,
                tuple(inner_train),
                outer,
                shape,
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
    labeled rows given to ``crossfit``; ``unlabeled`` rows the unlabeled ones. ``word_columns`` (``word_columns``
    of the matrix): the text's shape follows ``text_shape``; None: the one shape ``all``.
    """

    labeled: sp.csr_matrix
    unlabeled: sp.csr_matrix
    inner_k: int = INNER_FOLDS
    alpha: float = RIDGE_ALPHA
    word_columns: np.ndarray | None = None  # with them the text's shape follows ``text_shape``
    _cache: dict[tuple[bytes, int, int], tuple[FoldTextScores, ...]] = field(default_factory=dict, repr=False)

    def scores(self, y: np.ndarray, k: int, seed: int) -> tuple[FoldTextScores, ...]:
        y = np.asarray(y, dtype=np.float64)
        if y.shape[0] != self.labeled.shape[0]:
            raise ValueError(f"the text has {self.labeled.shape[0]} labeled rows but y has {y.shape[0]} labels")
        key = (y.tobytes(), k, seed)
        if key not in self._cache:
            self._cache[key] = nested_text_scores(
                self.labeled, y, self.unlabeled, k, seed, self.inner_k, self.alpha, self.word_columns
            )
        return self._cache[key]


def word_columns(terms: Sequence[tuple[str, str]]) -> np.ndarray | None:
    """The columns of the word block among ``terms`` (a ``TextMatrix``'s), or None when the word block is all
    there is or is missing (one shape only: nothing to choose)."""
    words = np.flatnonzero([block == "word" for block, _ in terms])
    return words if 0 < words.size < len(terms) else None


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
