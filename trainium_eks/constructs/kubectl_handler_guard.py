"""KubectlHandlerGuard: no principal but its own provider framework may invoke the cluster's kubectl handler."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from trainium_eks.core.validation import Problems


class KubectlHandlerGuard(Construct):
    """A resource-based policy on aws-eks-v2's kubectl handler function (``AWS::Lambda::ResourcePolicy``) that denies
    ``lambda:InvokeFunction`` to every principal but the role of the provider framework's onEvent function.

    The handler applies whatever manifest, Helm chart or patch its event carries, as a role that EKS maps to
    ``AmazonEKSClusterAdminPolicy``; without a guard, anyone whose own IAM policy allows ``lambda:InvokeFunction`` on it
    could run a privileged pod with one call, and with it a node and the roles it reaches. Its only caller is the
    custom-resource provider framework that aws-eks-v2 builds around it (aws-cdk-lib 2.275.0
    ``aws-eks-v2/lib/kubectl-provider.js``: ``new cr.Provider(this, "Provider", {onEventHandler: handler})``, no
    isComplete step; ``custom-resources/lib/provider-framework/provider.js`` ``addPermissions``:
    ``userDefinedHandlerLambda.grantInvoke(frameworkLambda)``, a synchronous invocation), whose onEvent function
    CloudFormation invokes. The onEvent function waits for the policy, so no manifest is applied before it holds and
    a replaced framework role is named in it before that role invokes.

    An explicit deny in a function's resource-based policy applies to principals of the function's own account too,
    and ``AWS::Lambda::ResourcePolicy``, unlike ``AWS::Lambda::Permission``, takes ``Deny`` statements and the full
    range of IAM global condition keys (CloudFormation template reference, AWS::Lambda::ResourcePolicy: "You can also
    deny access to specific entities"). The statement matches on ``aws:PrincipalArn``, which for a role's session is
    the role's ARN; a request without it is denied (a negated condition operator is true when its key is absent).
    The policy replaces the function's whole resource-based policy (Lambda developer guide,
    permissions-function-services: "Using put-resource-policy replaces any existing resource-based policy"); the handler
    has none other (nothing grants a service or account access to it).

    It closes the direct call only. The framework's onEvent function passes any event it is given on to the handler,
    so a principal allowed to invoke that function still reaches the handler through it (guarding it needs the
    principal CloudFormation invokes a custom resource's ServiceToken as, which a first deploy settles); and a
    principal that may change either function or its policy (``lambda:UpdateFunctionCode``,
    ``lambda:UpdateFunctionConfiguration``, ``lambda:PutResourcePolicy``, ``lambda:DeleteResourcePolicy``), pass the
    handler's role to code of its own, or create a function with the framework's role (``lambda:CreateFunction`` with
    ``iam:PassRole``: its sessions carry the admitted ``aws:PrincipalArn``) goes around it. Only IAM on those
    principals, or a service control policy, can stop them.

    :param provider: The cluster's kubectl provider (``eks.Cluster``'s child ``KubectlProvider``). Required.
    """

    def __init__(self, scope: Construct, id: str, *, provider: Construct) -> None:
        problems = Problems(f"{scope.node.path}/{id}")
        functions = kubectl_provider_functions(problems, provider)
        problems.raise_if_any()
        super().__init__(scope, id)
        handler, on_event = functions
        self.handler: lambda_.Function = handler
        """The kubectl handler function."""
        self.caller_role: iam.IRole = on_event.role
        """The role of the provider framework's onEvent function: the only principal that may invoke the handler."""
        self.policy = lambda_.CfnResourcePolicy(
            self, "Policy", resource_arn=handler.function_arn, policy_document=self.policy_document()
        )
        """The handler's resource-based policy."""
        on_event.node.default_child.add_dependency(self.policy)  # the function only: the policy names its role

    def policy_document(self) -> Dict[str, Any]:
        """The policy: one statement that denies every other principal."""
        arn = self.handler.function_arn
        return {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "OnlyTheProviderFramework",
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "lambda:InvokeFunction",
                    "Resource": [arn, f"{arn}:*"],
                    "Condition": {"ArnNotEquals": {"aws:PrincipalArn": self.caller_role.role_arn}},
                }
            ],
        }


def kubectl_provider_functions(
    problems: Problems, provider: Any
) -> Optional[Tuple[lambda_.Function, lambda_.Function]]:
    """The kubectl handler and the provider framework's onEvent function of ``provider`` (the ``KubectlProvider`` an
    ``eks.Cluster`` builds: its ``Handler``, and its ``Provider``'s ``framework-onEvent``), or None with a problem."""
    handler = provider.node.try_find_child("Handler") if isinstance(provider, Construct) else None
    framework = provider.node.try_find_child("Provider") if isinstance(provider, Construct) else None
    on_event = framework.node.try_find_child("framework-onEvent") if framework is not None else None
    if isinstance(handler, lambda_.Function) and isinstance(on_event, lambda_.Function):
        return handler, on_event
    problems.add(
        "provider",
        provider,
        "the kubectl provider an eks.Cluster builds (its child KubectlProvider), with its Handler function and its "
        "Provider's framework-onEvent function",
    )
    return None
