"""Who may write to the rating service: bearer tokens (compared in constant time, every token each time), the /rate
link's signature for its own session only, a per-caller rate limit (429), the tokens file's errors, and neither
tokens, signatures nor comments in the info log (issue 35, item 1)."""

from __future__ import annotations

import logging
import os
import socket

import pytest

from pulse_pipeline.serve import auth
from pulse_pipeline.serve.auth import RateLimiter, Tokens
from pulse_pipeline.serve.validation import Rejected
from pulse_pipeline.settings import SettingsError, serve_settings

from .serve_helpers import OTHER_TOKEN, TOKEN, serving

RATING = {"session_id": "s1", "stars": 4}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_without_the_right_token_nothing_is_stored(tmp_path):
    with serving(tmp_path, tokens=(TOKEN, OTHER_TOKEN)) as (client, service):
        missing = client.post("/v1/ratings", json=RATING)
        wrong = client.post("/v1/ratings", json=RATING, headers=bearer(TOKEN[:-1] + "x"))
        scheme = client.post("/v1/ratings", json=RATING, headers={"Authorization": f"Basic {TOKEN}"})
        ask = client.post("/v1/asks", json={"session_id": "s1"})
        scrape = client.get("/metrics")
        assert service.journal.last_seq == 0
        right = client.post("/v1/ratings", json=RATING, headers=bearer(OTHER_TOKEN))
        asked = client.post("/v1/asks", json={"session_id": "s2"}, headers=bearer(TOKEN))
        health = client.get("/healthz")  # open: a load balancer's probe has no token
    assert [r.status_code for r in (missing, wrong, scheme, ask, scrape)] == [401] * 5
    assert "no Authorization header" in missing.json()["error"]
    assert wrong.json() == {"error": "the bearer token is not one of PULSE_SERVE_TOKENS"}
    assert missing.headers["WWW-Authenticate"] == 'Bearer realm="pulse"'
    assert right.status_code == 201 and asked.status_code == 200 and health.status_code == 200


def test_every_token_is_compared_with_compare_digest(monkeypatch):
    calls = []

    def spy(a, b):
        calls.append((a, b))
        return a == b

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    tokens = Tokens((TOKEN, OTHER_TOKEN, "t0ken-cccccccccccccccc"))
    assert tokens.caller(f"Bearer {TOKEN}") == "token #1"
    assert len(calls) == 3  # not stopped at the first match: the time does not say which token matched
    calls.clear()
    with pytest.raises(Rejected):
        tokens.caller("Bearer nope")
    assert calls == [(b"nope", t.encode()) for t in (TOKEN, OTHER_TOKEN, "t0ken-cccccccccccccccc")]


def test_the_rate_link_signs_one_session(tmp_path):
    with serving(tmp_path, tokens=(TOKEN,)) as (client, service):
        url = client.post("/v1/asks", json={"session_id": "s1", "segment_index": 2}, headers=bearer(TOKEN)).json()
        sig = url["rate_url"].split("sig=")[1]
        page = client.get(f"/rate/s1?segment=2&sig={sig}")
        forged_page = client.get(f"/rate/s2?segment=2&sig={sig}")
        own = client.post("/v1/ratings", json={**RATING, "segment_index": 2, "signature": sig})
        other = client.post("/v1/ratings", json={**RATING, "session_id": "s2", "signature": sig})
    assert page.status_code == 200 and sig in page.text and page.headers["Cache-Control"] == "no-store"
    assert forged_page.status_code == 403 and "not valid" in forged_page.json()["error"]
    assert own.status_code == 201
    assert other.status_code == 403 and "signature does not match" in other.json()["error"]
    assert service.journal.last_seq == 2  # the decision and s1's rating


def test_a_rate_link_works_for_any_session_id(tmp_path):
    """A Claude Code sub-agent's id has a '/', others spaces, '?', '%' or accents: the link quotes them."""
    session = "abc/agent-7 ?x=%20é"
    with serving(tmp_path) as (client, _):
        url = client.post("/v1/asks", json={"session_id": session}).json()["rate_url"]
        page = client.get(url.removeprefix("https://pulse.example.org"))
        sig = url.split("sig=")[1]
        rated = client.post("/v1/ratings", json={"session_id": session, "stars": 2, "signature": sig})
    assert "/rate/abc%2Fagent-7%20%3Fx%3D%2520%C3%A9?sig=" in url
    assert page.status_code == 200, page.text
    assert rated.status_code == 201 and rated.json()["unknown_session"] is False


def test_a_caller_past_its_rate_gets_429_with_retry_after(tmp_path):
    with serving(tmp_path, tokens=(TOKEN, OTHER_TOKEN), rate_limit=2.0) as (client, _):
        first = [client.post("/v1/ratings", json=RATING, headers=bearer(TOKEN)).status_code for _ in range(6)]
        other = client.post("/v1/ratings", json=RATING, headers=bearer(OTHER_TOKEN))
        limited = client.post("/v1/ratings", json=RATING, headers=bearer(TOKEN))
        metrics = client.get("/metrics", headers=bearer(OTHER_TOKEN)).text
    # a burst of 2 x 2 = 4 (the test's requests take far less than the second a refill would need)
    assert first[:4] == [201] * 4 and 429 in first[4:]
    assert other.status_code == 201  # a bucket per token
    assert limited.status_code == 429 and "more than 2 requests a second" in limited.json()["error"]
    assert int(limited.headers["Retry-After"]) >= 1
    assert 'pulse_serve_rejected_total{reason="rate_limited"}' in metrics


def test_the_bucket_refills_at_the_rate():
    now = [0.0]
    limiter = RateLimiter(rate=10.0, clock=lambda: now[0])  # burst 20
    for _ in range(20):
        limiter.check("a")
    with pytest.raises(Rejected) as refused:
        limiter.check("a")
    assert refused.value.status == 429
    now[0] = 0.1  # 0.1 s x 10 a second = one request
    limiter.check("a")
    with pytest.raises(Rejected):
        limiter.check("a")
    RateLimiter(rate=0.0).check("a")  # 0: no limit


def test_the_tokens_file_is_checked_and_never_printed(tmp_path):
    path = tmp_path / "tokens"
    path.write_text(f"# team tokens\n{TOKEN}\n\n  {OTHER_TOKEN}  \n")
    settings = serve_settings({"PULSE_SERVE_TOKENS": str(path)})
    assert settings.tokens == (TOKEN, OTHER_TOKEN) and TOKEN not in repr(settings)
    path.write_text(f"{TOKEN}\nshort\n")
    with pytest.raises(SettingsError, match=r"tokens, line 2: a token must be at least 16 characters") as error:
        serve_settings({"PULSE_SERVE_TOKENS": str(path)})
    assert TOKEN not in str(error.value)
    path.write_text("# none\n")
    with pytest.raises(SettingsError, match="holds no token"):
        serve_settings({"PULSE_SERVE_TOKENS": str(path)})
    with pytest.raises(SettingsError, match=r"nothing: the tokens file cannot be read \(No such file"):
        serve_settings({"PULSE_SERVE_TOKENS": str(tmp_path / "nothing")})


def test_tokens_signatures_and_comments_never_reach_the_log(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    comment = "my secret complaint about the agent"
    with serving(tmp_path, tokens=(TOKEN,), roll_records=2) as (client, _):
        sig = client.post("/v1/asks", json={"session_id": "s1"}, headers=bearer(TOKEN)).json()["rate_url"]
        sig = sig.split("sig=")[1]
        client.post("/v1/ratings", json={**RATING, "comment": comment}, headers=bearer(TOKEN))
        client.post("/v1/ratings", json={**RATING, "comment": comment, "signature": sig})
        client.post("/v1/ratings", json=RATING, headers=bearer("wrong-token-wrong-token"))
        client.get(f"/rate/s1?sig={sig}")
    # every logger's lines but the test client's own (httpx logs the URLs it requests)
    text = "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith(("httpx", "httpcore")))
    assert "rolled" in text  # the log has lines: it just never has these
    for secret in (TOKEN, sig, comment, "wrong-token-wrong-token"):
        assert secret not in text


# --- pulse serve refuses, in one line, what it cannot do safely ------------------------------------------------


def _serve(argv: list[str], capsys) -> tuple[int, str]:
    from pulse_pipeline import cli

    code = cli.main(["serve", *argv])
    return code, capsys.readouterr().err


def test_pulse_serve_refuses_in_one_line(tmp_path, monkeypatch, capsys):
    for name in [n for n in os.environ if n.startswith("PULSE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PULSE_HOME", str(tmp_path / "home"))
    # another host than loopback without tokens
    code, err = _serve(["--host", "0.0.0.0"], capsys)
    assert code == 2 and err.startswith("pulse serve: --host 0.0.0.0 without PULSE_SERVE_TOKENS would let anyone")
    code, err = _serve(["--public-url", "ftp://x"], capsys)
    assert code == 2 and "--public-url 'ftp://x' is not an http(s) URL" in err
    # a port in use
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = _serve(["--port", str(port)], capsys)
    assert code == 2
    assert err == f"pulse serve: cannot listen on 127.0.0.1:{port} (Address already in use): choose another --port\n"
    # a home another service serves
    from pulse_pipeline.serve.service import Service

    from .serve_helpers import settings

    running = Service(tmp_path / "home", settings(), "http://x").open()
    try:
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = free.getsockname()[1]
        code, err = _serve(["--port", str(port)], capsys)
    finally:
        running.close()
    assert code == 2 and err.startswith(f"pulse serve: another pulse serve (pid {os.getpid()}) already serves")


def test_a_bad_serve_setting_stops_the_service_in_one_line_and_not_the_pipeline(tmp_path, monkeypatch, capsys):
    """PULSE_SERVE_* are the service's own: `pulse serve` refuses a bad one before it starts, while the pipeline's
    check of every setting (`check_environment`, run by ingest, materialize and the code location) ignores them."""
    from pulse_pipeline.settings_files import check_environment

    for name in [n for n in os.environ if n.startswith("PULSE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PULSE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PULSE_SERVE_TOKENS", str(tmp_path / "no-such-file"))
    code, err = _serve([], capsys)
    assert code == 2 and err.startswith("pulse serve: PULSE_SERVE_TOKENS=") and "cannot be read" in err
    check_environment()  # nothing raised: a broken tokens file does not stop the stages
