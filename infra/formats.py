"""The formats and allowed values the deployment settings (``infra.config``) are checked against: AWS's and kOps'
own, each with where it comes from."""

from __future__ import annotations

import re

# CloudWatch Logs accepts only these retention periods (PutRetentionPolicy, "retentionInDays").
LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)

# kOps cluster names are DNS names (or end in .k8s.local for gossip clusters).
CLUSTER_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")
SERVICE_ACCOUNT_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?:[a-z0-9]([-.a-z0-9]*[a-z0-9])?$")
# IAM ARN of an OIDC identity provider: arn:<partition>:iam::<account>:oidc-provider/<issuer host and path>
OIDC_PROVIDER_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:oidc-provider/(?P<issuer>[^\s]+)$")
ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
