#!/usr/bin/env python3
"""CDK entry point: ``python app.py`` (or ``cdk synth``) synthesizes one stack per cluster of ``cdk.json``.

No Docker and no CDK CLI needed: the Lambda asset is bundled locally (infra/bundling.py).
"""

from __future__ import annotations

import os


def main() -> None:
    # jsii prints a banner on every start under node 20 (past its end of life); synthesis works the same.
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from infra.application import build_app

    build_app().synth()


if __name__ == "__main__":
    main()
