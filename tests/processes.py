"""How the tests start a command they will press Ctrl-C on."""

from __future__ import annotations

import signal


def as_a_terminal_starts_it() -> None:
    """``preexec_fn`` for ``subprocess.Popen``: the child starts with SIGINT at its default action, as a command a
    terminal runs in the foreground does.

    A non-interactive shell starts its background jobs with SIGINT ignored (POSIX, "Signals" in the Shell Command
    Language), and CI runners start the suite that way; a Python started with SIGINT ignored installs no
    ``KeyboardInterrupt`` handler (``signal`` module docs), so without this a Ctrl-C test tests nothing but the
    runner's environment.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
