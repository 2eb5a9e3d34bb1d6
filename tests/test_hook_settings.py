"""``settings.hook_settings``: the ``PULSE_HOOK_*`` variables, their defaults and their one-line refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulse_pipeline.settings import SettingsError, hook_settings


def test_the_defaults_and_pulse_home_only_when_set(tmp_path):
    settings = hook_settings({"HOME": str(tmp_path)})
    assert (settings.url, settings.token_file, settings.timeout, settings.home) == (
        "http://127.0.0.1:8765", None, 2.0, None
    )  # fmt: skip
    assert settings.state_dir == Path("~/.local/state/pulse/hooks").expanduser()
    chosen = hook_settings({"PULSE_HOOK_URL": "https://pulse.example/", "PULSE_HOOK_TIMEOUT": "0.5",
                            "XDG_STATE_HOME": str(tmp_path / "xdg"), "PULSE_HOME": str(tmp_path / "home"),
                            "PULSE_HOOK_TOKEN_FILE": str(tmp_path / "token")})  # fmt: skip
    assert chosen.url == "https://pulse.example" and chosen.timeout == 0.5
    assert chosen.state_dir == tmp_path / "xdg" / "pulse" / "hooks"
    assert (chosen.home, chosen.token_file) == (tmp_path / "home", tmp_path / "token")


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"PULSE_HOOK_URL": "127.0.0.1:8765"}, "PULSE_HOOK_URL='127.0.0.1:8765' is not an http(s) URL"),
        ({"PULSE_HOOK_URL": "ftp://host"}, "is not an http(s) URL"),
        ({"PULSE_HOOK_TIMEOUT": "0"}, "PULSE_HOOK_TIMEOUT=0.0 must be a number of seconds above 0"),
        ({"PULSE_HOOK_TIMEOUT": "nan"}, "must be a number of seconds above 0"),
        ({"PULSE_HOOK_TIMEOUT": "61"}, "at most 60"),
    ],
)
def test_a_value_the_hooks_cannot_use_is_refused_in_one_line(env, said):
    with pytest.raises(SettingsError, match=None) as refused:
        hook_settings(env)
    assert said in str(refused.value) and "\n" not in str(refused.value)
