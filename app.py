#!/usr/bin/env python3
"""CDK entry point: ``python app.py`` (or ``cdk synth``) synthesizes one stack per cluster of ``cdk.json``.

No Docker and no CDK CLI needed: the Lambda asset is bundled locally (infra/bundling.py).
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    """Synthesize; returns the exit code: 0, or 2 with one line on stderr naming the key when ``cdk.json`` (or the
    CLI's ``--context``) is not valid JSON or holds a bad setting (``core.exceptions.SettingsError``)."""
    # jsii prints a banner on every start under node 20 (past its end of life); synthesis works the same.
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from json import JSONDecodeError

    from core.exceptions import SettingsError
    from infra.application import build_app

    try:
        app = build_app()
    except SettingsError as error:  # "setting clusters[0].<key>: <why>"
        print(f"cdk.json: {error}", file=sys.stderr)
        return 2
    except JSONDecodeError as error:
        print(f"cdk.json: not JSON: {error}", file=sys.stderr)
        return 2
    assembly = app.synth()
    if "CDK_OUTDIR" not in os.environ:  # run by hand (`make synth`), not by the CDK CLI: say what came out, and where
        stacks = ", ".join(stack.stack_name for stack in assembly.stacks)
        print(
            f"synthesized {stacks} into {os.path.relpath(assembly.directory)}/ (templates *.template.json)",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
