"""What the process environment must hold before PULSE opens DuckDB, set once when the package is imported.

DuckDB computes its home directory (where it would keep extensions and secrets) from ``HOME`` at every connect,
and ``LOAD ducklake`` fails with "Can't find the home directory at ''" when ``HOME`` is unset, as it is under cron,
a systemd unit without ``User=`` home, or ``env -i``: every command that opens the lake stopped there. The home
then is the one the password database gives the user (what ``~`` means to a shell), else the temporary folder.
PULSE loads its DuckDB extensions from wheels, so nothing is written there.
"""

from __future__ import annotations

import os
import pwd
import tempfile


def ensure_home_variable() -> None:
    """Set ``HOME`` when it is unset or empty (module docstring); an existing value is never changed."""
    if os.environ.get("HOME"):
        return
    try:
        home = pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:  # a uid with no entry (some containers)
        home = ""
    os.environ["HOME"] = home if home and os.path.isdir(home) else tempfile.gettempdir()
