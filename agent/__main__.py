"""``python -m agent``: run the in-cluster agent (see agent/app.py).

The process ends with ``os._exit`` once ``main`` returned: by then every in-flight command was finished or handed
back to another agent, and the drain engine's worker threads still backing off for a handed-back command must not
hold the process (the interpreter would join them at exit, up to that command's deadline).
"""

from __future__ import annotations

import logging
import os
import sys

from agent.app import main

if __name__ == "__main__":
    code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
