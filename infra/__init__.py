"""The AWS CDK app: one stack per configured cluster, one construct per logical unit.

- ``config``: the ``cdk.json`` context, validated into frozen settings (``DeploymentConfig``).
- ``bundling``: the Lambda asset, built locally (no Docker) for the Lambda's own platform.
- ``state``, ``commands``, ``interruption``, ``agent``: one construct each.
- ``nag``: cdk-nag's AwsSolutions checks and reasoned acknowledgements.
- ``permissions``: the IAM statements that no single resource owns (Describe calls, tag-scoped ASG actions).
- ``stack``: composes the constructs and grants between them. ``application``: builds the app.
"""
