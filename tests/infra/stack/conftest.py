"""The one synthesis of the stack these tests look into (``resources.CONTEXT``), shared by every file of the package:
a synth runs the local bundling, cdk-nag and CloudFormation validation (several seconds), so it is done once for the
package, as it was once for the single module these files were split from."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from tests.infra.conftest import Synthesis, synthesize
from tests.infra.stack.resources import CONTEXT, STACK


@pytest.fixture(scope="package")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    return synthesize(CONTEXT, tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="package")
def template(synth: Synthesis) -> Template:
    return synth.template(STACK)
