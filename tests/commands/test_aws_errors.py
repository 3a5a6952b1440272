"""advice: the one line a command prints when AWS cannot be reached, for each botocore error users meet first."""

import pytest
from botocore import exceptions

from trainium_eks.commands.aws_errors import advice


@pytest.mark.parametrize(
    "error,expected",
    [
        (exceptions.NoCredentialsError(), "no AWS credentials: sign in"),
        (exceptions.ProfileNotFound(profile="work"), "no AWS profile 'work'"),
        (exceptions.NoRegionError(), "no AWS region: pass --region, set AWS_REGION"),
        (exceptions.EndpointConnectionError(endpoint_url="https://sts.amazonaws.com"), "cannot reach https://sts"),
        (exceptions.TokenRetrievalError(provider="sso", error_msg="expired"), "aws sso login"),
        (
            exceptions.ClientError({"Error": {"Code": "ExpiredToken", "Message": "x"}}, "GetCallerIdentity"),
            "credentials have expired",
        ),
        (
            exceptions.ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetRole"),
            "GetRole: access denied (no)",
        ),
        (
            exceptions.ClientError({"Error": {"Code": "Throttling", "Message": "slow"}}, "StartExecution"),
            "StartExecution failed: Throttling: slow",
        ),
    ],
)
def test_each_error_gets_one_line_that_says_what_to_do(error, expected):
    message = advice(error)
    assert message is not None and expected in message and "\n" not in message


def test_an_error_that_is_not_botocores_is_left_to_show():
    assert advice(ValueError("a defect")) is None
