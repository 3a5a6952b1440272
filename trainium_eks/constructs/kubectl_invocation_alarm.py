"""KubectlInvocationAlarm: a notification for every invocation of the kubectl provider's functions that is not their
own provider's."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from aws_cdk import ArnFormat, Names, RemovalPolicy, Stack
from aws_cdk import aws_cloudtrail as cloudtrail
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from trainium_eks.constructs.kubectl_handler_guard import kubectl_provider_functions
from trainium_eks.core.nag import acknowledge
from trainium_eks.core.validation import Problems, check_bool, check_implements

INVOKE_EVENTS = ("Invoke", "InvokeWithResponseStream")
"""The event names of an invocation: the Invoke API's, and InvokeWithResponseStream's, which a Node.js function such
as the provider framework's answers too (the name CloudTrail records for the latter is the API's, unconfirmed)."""

CLOUDFORMATION = "cloudformation.amazonaws.com"
"""What CloudTrail records in ``userIdentity.invokedBy`` when CloudFormation makes a call on a principal's behalf."""


class KubectlInvocationAlarm(Construct):
    """A notification on an SNS topic whenever the kubectl provider's handler is invoked by anyone but the provider
    framework's role, or the framework's onEvent function by anything but CloudFormation.

    :class:`~trainium_eks.constructs.kubectl_handler_guard.KubectlHandlerGuard` denies the handler to every other
    principal, but not the onEvent function, which hands any event to the handler: whoever may invoke it can apply any
    manifest as cluster admin. This records who does. A CloudTrail trail logs the Lambda data events of the two
    functions (``Invoke``); CloudTrail sends them to the default EventBridge bus, where two rules match an invocation
    (:data:`INVOKE_EVENTS`) of a function (by ``resources[].ARN``, which holds the function's ARN in the recorded
    samples) whose caller is not the expected one, and publish the event to :attr:`topic`:

    - the handler: an ``Invoke`` whose ``userIdentity.sessionContext.sessionIssuer.arn`` is not the framework role's,
      or is absent (a user, the root user, an AWS service);
    - the onEvent function: an ``Invoke`` whose ``userIdentity.invokedBy`` is not ``cloudformation.amazonaws.com``, or
      is absent. Which identity CloudFormation's own invocations carry is not documented: if every deploy notifies,
      the next deploy's event shows it. A principal allowed to create a stack of its own whose custom resource names
      the onEvent function as its service token reaches it through CloudFormation and is not reported.

    Sources: EventBridge user guide, "AWS service events delivered via AWS CloudTrail" ("To record events with a
    detail-type value of AWS API Call via CloudTrail, a CloudTrail trail with logging enabled is required"; such
    events go to the default event bus); "Content filtering in event patterns" (a pattern matches only events that
    contain every field it names, hence ``exists: false`` beside ``anything-but`` in a ``$or``; an array matches when
    any element does). CloudTrail does not log invocations denied for lack of permission (Lambda developer guide,
    "Logging Lambda API calls with CloudTrail"), so attempts the guard refuses leave no event; this catches the
    invocations that succeed: the onEvent function's callers, and the handler's if its policy is ever removed.

    A trail costs its data events (0.10 USD per 100,000; these functions run only during deploys) and its log objects;
    an account has at most 5 trails per region (CloudTrail user guide, "Quotas in AWS CloudTrail"), which is why this is
    off unless asked for. The log bucket is retained (logs are evidence) and refuses writes of any trail but its own
    (a deny of every other ``aws:SourceArn``: CloudTrail user guide, "Amazon S3 bucket policy for CloudTrail"); the
    topic and its key go with the stack. EventBridge publishes as :attr:`publisher`, a role of the stack, so the
    topic's policy grants the EventBridge service nothing. Subscribe to :attr:`topic` yourself (``aws sns
    subscribe``); a topic of yours encrypted with a key this construct does not know needs the key's use granted to
    :attr:`publisher`, and one in another account a topic policy that lets :attr:`publisher` publish. The trail is
    named after its construct path: an alarm deployed before it had a name gets a new trail (the old one is deleted
    after; meanwhile the bucket refuses its logs and the region counts both trails against its five).

    :param provider: The cluster's kubectl provider (``eks.Cluster``'s child ``KubectlProvider``). Required.
    :param topic: Where the notifications go. Default: a new topic encrypted with a new KMS key (yearly rotation),
        TLS only.
    :param trail: Create the trail. Default: true; false when the account already logs Lambda data events of these
        functions in a trail of the region (an organization trail, say), which sends them to EventBridge the same way.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        provider: Construct,
        topic: Optional[sns.ITopic] = None,
        trail: bool = True,
    ) -> None:
        problems = Problems(f"{scope.node.path}/{id_}")
        functions = kubectl_provider_functions(problems, provider)
        if topic is not None:
            check_implements(problems, "topic", topic, sns.ITopic, "an sns.ITopic")
        check_bool(problems, "trail", trail)
        problems.raise_if_any()
        super().__init__(scope, id_)
        handler, on_event = functions
        if topic is None:
            key = kms.Key(self, "TopicKey", enable_key_rotation=True, removal_policy=RemovalPolicy.DESTROY)
            topic = sns.Topic(self, "Topic", master_key=key, enforce_ssl=True)
        self.topic: sns.ITopic = topic
        """The topic the notifications are published to."""
        self.trail: Optional[cloudtrail.Trail] = None
        """The trail that logs the two functions' invocations, when this construct made one."""
        if trail:
            name = Names.unique_resource_name(self, max_length=128, separator="-")
            self.trail = cloudtrail.Trail(
                self,
                "Trail",
                trail_name=name,
                management_events=cloudtrail.ReadWriteType.NONE,
                is_multi_region_trail=False,
                include_global_service_events=False,
                enable_file_validation=True,
            )
            self.trail.add_lambda_event_selector([handler, on_event], include_management_events=False)
            trail_arn = Stack.of(self).format_arn(
                service="cloudtrail",
                resource="trail",
                resource_name=name,
                arn_format=ArnFormat.SLASH_RESOURCE_NAME,
            )
            bucket = self.trail.node.find_child("S3")
            bucket.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="OnlyThisTrailWrites",
                    effect=iam.Effect.DENY,
                    principals=[iam.ServicePrincipal("cloudtrail.amazonaws.com")],
                    actions=["s3:PutObject"],
                    resources=[bucket.arn_for_objects("*")],
                    conditions={"StringNotEquals": {"aws:SourceArn": trail_arn}},
                )
            )
            acknowledge(
                self.trail,
                "AwsSolutions-S1",
                "the trail's own log bucket: logging its access would need another bucket; CloudTrail validates its "
                "log files (digest files)",
            )
        self.publisher = iam.Role(
            self,
            "PublishRole",
            assumed_by=iam.ServicePrincipal("events.amazonaws.com"),
            description="EventBridge publishes the kubectl invocation alarm's notifications to its topic as this role",
        )
        """The role EventBridge publishes to :attr:`topic` as (``sns:Publish`` on it, and its key's use when the
        topic is this construct's): the topic's own policy then grants EventBridge nothing."""
        acknowledge(
            self.publisher,
            "AwsSolutions-IAM5",
            "kms:GenerateDataKey* on the topic's key alone: the SNS target's grant, the actions the SNS developer "
            "guide names for a publisher to an encrypted topic (kms:GenerateDataKey*, kms:Decrypt)",
            "Action::kms:GenerateDataKey*",
        )
        self.rules: List[events.Rule] = [
            self._rule(
                "HandlerInvoked",
                handler.function_arn,
                {"sessionContext": {"sessionIssuer": {"arn": [{"anything-but": [on_event.role.role_arn]}]}}},
                {"sessionContext": {"sessionIssuer": {"arn": [{"exists": False}]}}},
                "the kubectl handler was invoked by another principal than its provider framework's role",
            ),
            self._rule(
                "OnEventInvoked",
                on_event.function_arn,
                {"invokedBy": [{"anything-but": [CLOUDFORMATION]}]},
                {"invokedBy": [{"exists": False}]},
                "the kubectl provider framework's onEvent function was invoked other than by CloudFormation",
            ),
        ]
        """The two rules, the handler's then the onEvent function's."""

    def _rule(
        self, id_: str, function_arn: str, other: Dict[str, Any], absent: Dict[str, Any], description: str
    ) -> events.Rule:
        rule = events.Rule(
            self,
            id_,
            description=f"Notifies when {description}",
            event_pattern=events.EventPattern(
                source=["aws.lambda"],
                detail_type=["AWS API Call via CloudTrail"],
                detail={
                    "eventSource": ["lambda.amazonaws.com"],
                    "eventName": list(INVOKE_EVENTS),
                    "resources": {"ARN": [function_arn]},
                    "userIdentity": {"$or": [other, absent]},
                },
            ),
        )
        rule.add_target(targets.SnsTopic(self.topic, role=self.publisher))
        return rule
