#!/usr/bin/env python3
"""CDK entry point: ``python app.py`` (or ``cdk synth``) synthesizes one stack per cluster of ``cdk.json``.

No Docker and no CDK CLI needed: the Lambda asset is bundled locally (infra/bundling.py).
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    # jsii prints a banner on every start under node 20 (past its end of life); synthesis works the same.
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from infra.application import build_app

    assembly = build_app().synth()
    if "CDK_OUTDIR" not in os.environ:  # run by hand (`make synth`), not by the CDK CLI: say what came out, and where
        stacks = ", ".join(stack.stack_name for stack in assembly.stacks)
        print(
            f"synthesized {stacks} into {os.path.relpath(assembly.directory)}/ (templates *.template.json)",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
