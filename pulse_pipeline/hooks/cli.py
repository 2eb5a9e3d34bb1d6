"""``pulse hook <agent>``: the command the agents run. It must never break the agent that runs it.

So every failure (the service down or slow, a bad payload, a setting PULSE cannot use, a log it cannot read, a bug)
ends the same way: one line on stderr, ``pulse hook <agent>: ...``, and exit 0, with nothing on stdout (where the
agent reads a protocol). A bad argument too: ``cli.main`` hands ``hook`` here before its own parser, whose errors
exit 2, which Claude Code reads on a ``Stop`` hook as "do not stop, and tell the model stderr". The one exit code
other than 0 is a protocol's answer: 2 from a Claude Code ``UserPromptSubmit`` that blocks a typed rating
(``claude_code.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

AGENTS = ("claude-code", "codex", "openhands")
SHOW = ("notify", "browser", "none")  # codex.SHOW, repeated here so the parser imports nothing
MAX_INPUT_BYTES = 8 << 20  # a hook's stdin is a few KiB (OpenHands batches: a table export, larger)


class _Refused(ValueError):
    pass


class _QuietParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would exit 2
        raise _Refused(message)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agent", choices=AGENTS, help="the agent that runs the hook")
    parser.add_argument(
        "payload",
        nargs="?",
        help="the JSON argument (Codex's notify appends it; OpenHands: a feedback body); without it, stdin is read",
    )
    parser.add_argument(
        "--drop",
        action="store_true",
        help="also hand the session's log to PULSE_HOME/drops (Claude Code at SessionEnd, Codex every 10 minutes)",
    )
    parser.add_argument(
        "--show",
        choices=SHOW,
        default="notify",
        help="Codex notify: how the rating link is shown (desktop notification, browser, none)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _QuietParser(prog="pulse hook", description="Run by an agent: ask for and forward ratings.")
    add_arguments(parser)
    return parser


def _read_input(args: argparse.Namespace) -> str:
    if args.payload is not None:
        return args.payload
    if sys.stdin is None or sys.stdin.isatty():
        raise _Refused("no input: the agent writes its JSON on stdin (or, Codex notify, as the last argument)")
    data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise _Refused(f"the input is over {MAX_INPUT_BYTES} bytes; nothing done")
    return data.decode("utf-8", "replace")


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise _Refused(f"the input is not JSON ({error}; it starts {text[:60]!r})") from None


def run(args: argparse.Namespace):
    """The outcome of one hook call (``flow.Outcome``); raises on failure (``main`` turns it into one line)."""
    from ..settings import hook_settings
    from .client import Service
    from .flow import Hook

    settings = hook_settings()
    drops, unset = (settings.home / "drops" if settings.home else None), None
    if args.drop and drops is None:  # the rest still runs: asking matters more than handing the log over
        unset = "--drop needs PULSE_HOME set to the home the pipeline reads; the log was not handed over"
    hook = Hook(
        Service.from_settings(settings.url, settings.token_file, settings.timeout),
        settings.state_dir,
        drops if args.drop else None,
    )
    outcome = _answer(args, hook, _read_input(args))
    if unset:
        outcome.stderr = f"{outcome.stderr}; {unset}" if outcome.stderr else unset
    return outcome


def _answer(args: argparse.Namespace, hook, text: str):
    if args.agent == "openhands":
        from .openhands import bodies, forward

        return forward(bodies(text), hook)
    payload = _parse(text)
    if args.agent == "claude-code":
        from .claude_code import handle

        return handle(payload, hook)
    from .codex import handle_hook, handle_notify

    if args.payload is not None:
        return handle_notify(payload, hook, args.show)
    return handle_hook(payload, hook)


def main(argv: list[str]) -> int:
    """Run ``pulse hook ...`` (``argv`` without ``hook``); the exit code (0 but for a protocol's answer)."""
    agent = next((a for a in argv if a in AGENTS), "")
    label = f"pulse hook {agent}".rstrip()
    try:
        # intermixed: Codex appends the JSON after the options (`notify = ["pulse", "hook", "codex", "--drop"]`)
        args = build_parser().parse_intermixed_args(argv)
        outcome = run(args)
    except SystemExit:  # --help printed
        return 0
    except Exception as error:  # noqa: BLE001 (whatever it is, the agent must go on)
        line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        if not isinstance(error, ValueError | OSError | RuntimeError):
            line = f"{type(error).__name__}: {line} (a bug in PULSE's hook; the agent goes on)"
        print(f"{label}: {line}", file=sys.stderr, flush=True)
        return 0
    if outcome.stdout:
        print(outcome.stdout, flush=True)
    if outcome.stderr:  # a blocked prompt's line is the user's answer, said as it is
        print(outcome.stderr if outcome.exit_code == 2 else f"{label}: {outcome.stderr}", file=sys.stderr, flush=True)
    return outcome.exit_code
