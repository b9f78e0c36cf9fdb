"""cdk-nag (3.x) wiring: the AwsSolutions pack as a CDK policy-validation plugin, and reasoned acknowledgements.

cdk-nag 3 runs through CDK's ``Validations`` framework: any unacknowledged finding, error or warning, fails
``app.synth()`` and is written to ``validation-report.json`` in the cloud assembly. A finding is acknowledged on a
construct (it covers the construct's children) with ``Validations.of(construct).acknowledge(...)``; findings of
rules that report several per resource (IAM5) are acknowledged one by one as ``RuleId[Finding]``.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

ACKNOWLEDGED_RULES_METADATA_KEY = Validations.ACKNOWLEDGED_RULES_METADATA_KEY


def add_checks(scope: IConstruct) -> None:
    """Run the AwsSolutions pack over ``scope`` (an App or Stage) at synth time, with explanations."""
    Validations.of(scope).add_plugins(AwsSolutionsChecks(scope, verbose=True))


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Acknowledge the finding ``rule_id`` on ``scope`` and its children, saying why it is acceptable.

    Raises:
        ValueError: ``reason`` is blank (every acknowledgement must carry one).
    """
    if not reason.strip():
        raise ValueError(f"acknowledging {rule_id} needs a reason")
    Validations.of(scope).acknowledge(Acknowledgment(id=rule_id, reason=reason))
