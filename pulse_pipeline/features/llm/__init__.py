"""The LLM annotator and the LLM-as-a-judge baseline: the paper's prompts, through litellm, cached, capped.

One module per concern:

| module | what it holds |
|---|---|
| ``pulse_pipeline.settings`` | ``LLMSettings`` / ``llm_settings()``: model, server, concurrency, retries, prices, cap |
| ``cache.py`` | ``LLMCache``: valid answers in ``features.llm_cache`` |
| ``answers.py`` | parsing a model's JSON answer and validating it against the rubric (``InvalidAnswer``) |
| ``litellm_loader.py`` | ``load_litellm``: litellm imported once, its network look-ups off |
| ``request.py`` | one request through litellm, retried with backoff on what a retry can fix |
| ``budget.py`` | what a response costs, and the spend cap (``SpendBudget``) |
| ``complete.py`` | ``complete_json``: one prompt asked, its answer validated, re-asked once if invalid |
| ``engine.py`` | the thread pool, the cache look-up and the totals the annotator and the judge share |
| ``annotator.py`` | ``LLMAnnotator``: the paper's two annotation prompts for every session |
| ``judge.py`` | ``LLMJudge``: the paper's judge prompt for every session (``JudgeScore`` rows) |

How one prompt is answered (``complete_json``):

1. the prompt is redacted (``redact.py``): nothing leaves the machine, or reaches the cache, unredacted;
2. the cache (``features.llm_cache``) is looked up by sha256 of (``PROMPT_VERSION``, model, redacted prompt);
3. otherwise one ``litellm.completion`` request, with litellm's own retries off (``max_retries=0``,
   ``num_retries=0``: its retries multiply ours and need tenacity anyway). We retry with tenacity, exponential
   backoff with jitter, at most ``max_retries`` more times, only on what a retry can fix: rate limits (429),
   timeouts, connection errors and 5xx. A 4xx (bad request, auth, not found, context too long) fails at once;
4. the answer is parsed as JSON (```json fences and prose around the object tolerated) and validated against the
   rubric (``analysis_check``, ``issues_check``, ``judge_check``: categories from the options, at most
   ``max_choices`` of them, YES/NO). An invalid answer is re-asked ONCE, with the answer and what is wrong with it
   appended to the conversation; a second invalid answer fails the prompt;
5. a valid answer is cached (only valid answers are).

Cost: when ``LLMSettings`` gives prices (``input_cost_per_token``/``output_cost_per_token``, from
``PULSE_LLM_INPUT_COST_PER_TOKEN``/``PULSE_LLM_OUTPUT_COST_PER_TOKEN``), cost = tokens x price, computed here (a
local or self-hosted model has no litellm price). Otherwise ``litellm.completion_cost`` from its bundled price map,
and 0.0 for a model it does not know. Tokens are the response's ``usage``.

Spend cap (``PULSE_LLM_SPEND_CAP_USD``): the cost of every response of this annotator (or judge) instance adds up;
before each new request (retries and re-asks included), once the total is at or above the cap no request is made
and the prompt fails with "spend cap of $X reached". Requests already in flight finish, so the total can exceed the
cap by at most ``concurrency`` requests. Cache hits cost nothing and are still used after the cap, so a re-run
after raising the cap pays only for what is missing.

Sessions (``LLMAnnotator``, ``LLMJudge``) run concurrently on ``concurrency`` threads; one bad session never fails
the run, its status says what happened:

- ``ok``: every answer valid; ``truncated``: valid, but the transcript was cut to ``transcript_chars``
  (``notes["truncated"]`` says how much);
- ``skipped``: the session has no user message, so there is nothing to ask and no request is made (every answer is
  the empty value with explanation "no user message");
- ``failed``: a prompt got no valid answer (error, cap, or invalid twice). The fallback for each feature of that
  prompt is the empty value ``""`` with the error as its explanation; it is not a guess at a category, so no
  downstream count mistakes a failure for an answer. Answers of the session's other prompt, when valid, are kept.

litellm is imported on first use with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` and ``LITELLM_OFFLINE_MODE=true``
(unless already set): otherwise its import fetches a price map over the network and token counting can hang
offline. Its own cache is not used (it crashes on a hit in 1.110.2); ``LLMCache`` is ours.
"""

from ...settings import LLMSettings, llm_settings
from .annotator import LLMAnnotator
from .answers import (
    InvalidAnswer,
    JudgeAnswer,
    ParsedAnnotation,
    analysis_check,
    feature_value,
    issues_check,
    judge_check,
    parse_json,
)
from .budget import SpendBudget, SpendCapReached
from .cache import CachedAnswer, LLMCache
from .complete import CallResult, complete_json
from .engine import LLMTotals
from .judge import JudgeScore, LLMJudge

__all__ = [
    "CachedAnswer",
    "CallResult",
    "InvalidAnswer",
    "JudgeAnswer",
    "JudgeScore",
    "LLMAnnotator",
    "LLMCache",
    "LLMJudge",
    "LLMSettings",
    "LLMTotals",
    "ParsedAnnotation",
    "SpendBudget",
    "SpendCapReached",
    "analysis_check",
    "complete_json",
    "feature_value",
    "issues_check",
    "judge_check",
    "llm_settings",
    "parse_json",
]
