"""AgentIdentity: the IAM role the in-cluster agent runs as.

Trust, in order of preference:

1. ``existing_role_arn``: a role managed elsewhere; the stack only attaches its policies to it (same account).
2. ``oidc_provider_arn`` (IRSA): assumable with ``sts:AssumeRoleWithWebIdentity`` only by the agent's Kubernetes
   service account, ``system:serviceaccount:<namespace>:<name>``, with the token audience ``audience``: kOps' IAM
   OIDC provider lists the client ID ``amazonaws.com`` and its pod-identity-webhook projects tokens with
   ``--token-audience=amazonaws.com`` (kops ``pkg/model/awsmodel/oidc_provider.go``, ``defaultAudience``); EKS uses
   ``sts.amazonaws.com`` (https://docs.aws.amazon.com/eks/latest/userguide/associate-service-account-role.html).
   STS refuses a token whose ``aud`` the condition does not list.
3. Otherwise: assumable by principals of this account that are allowed ``sts:AssumeRole`` on it (until the
   cluster has an OIDC provider).

Its permissions on the queue, the table and the event bus are granted by the stack.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.config import IRSA_AUDIENCE


class AgentIdentity(Construct):
    """The agent's role.

    Parameters:
        oidc_provider_arn, oidc_issuer: the cluster's IAM OIDC provider and its issuer (host and path, no scheme).
        service_account: ``<namespace>:<name>`` of the agent's service account (used with OIDC only).
        existing_role_arn: use this role instead of creating one.
        audience: the ``<issuer>:aud`` the role's trust requires (used with OIDC only).

    Attributes:
        role: the role to grant to and to annotate the service account with (``eks.amazonaws.com/role-arn``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        oidc_provider_arn: str | None = None,
        oidc_issuer: str | None = None,
        service_account: str = "node-manager:agent",
        existing_role_arn: str | None = None,
        audience: str = IRSA_AUDIENCE,
    ) -> None:
        super().__init__(scope, construct_id)
        if existing_role_arn is not None:
            self.role: iam.IRole = iam.Role.from_role_arn(self, "Role", existing_role_arn, mutable=True)
            return
        if oidc_provider_arn is not None:
            if not oidc_issuer:
                raise ValueError("oidc_issuer is required with oidc_provider_arn")
            namespace, name = service_account.split(":", 1)
            provider = iam.OpenIdConnectProvider.from_open_id_connect_provider_arn(
                self, "OidcProvider", oidc_provider_arn
            )
            principal: iam.IPrincipal = iam.OpenIdConnectPrincipal(
                provider,
                conditions={
                    "StringEquals": {
                        f"{oidc_issuer}:sub": f"system:serviceaccount:{namespace}:{name}",
                        f"{oidc_issuer}:aud": audience,
                    },
                },
            )
        else:
            principal = iam.AccountRootPrincipal()
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=principal,
            description="node-manager agent (in-cluster): commands, membership, drain events",
        )
