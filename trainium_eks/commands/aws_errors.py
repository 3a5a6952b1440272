"""What a command says when it cannot reach AWS: one line that says what to do, for the errors users meet first."""

from __future__ import annotations

from typing import Optional


def advice(error: BaseException) -> Optional[str]:
    """One line for ``error`` if it is a botocore error (no credentials, unknown profile, no region, no network,
    expired or refused credentials, any other call that failed), else None (then it is a defect: let it show)."""
    from botocore import exceptions

    if isinstance(error, exceptions.NoCredentialsError):
        return "no AWS credentials: sign in (aws sso login, or aws configure), or pass --profile <name>"
    if isinstance(error, exceptions.ProfileNotFound):
        return f"no AWS profile {error.kwargs.get('profile')!r}: `aws configure list-profiles` lists yours"
    if isinstance(error, exceptions.NoRegionError):
        return "no AWS region: pass --region, set AWS_REGION, or give the profile a region"
    if isinstance(error, (exceptions.EndpointConnectionError, exceptions.ConnectTimeoutError)):
        return f"cannot reach {error.kwargs.get('endpoint_url', 'AWS')}: check the network (and HTTPS_PROXY, if any)"
    if isinstance(error, (exceptions.TokenRetrievalError, exceptions.SSOTokenLoadError)):
        return "the AWS SSO session has expired or never started: run `aws sso login` (with --profile <name>)"
    if isinstance(error, exceptions.ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        message = error.response.get("Error", {}).get("Message", "")
        operation = getattr(error, "operation_name", "the call")
        if code in ("ExpiredToken", "ExpiredTokenException", "RequestExpired"):
            return "the AWS credentials have expired: sign in again (aws sso login, or refresh the session)"
        if code in ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation"):
            return f"{operation}: access denied ({message}); use a role that may call it (--profile <name>)"
        return f"{operation} failed: {code}: {message}"
    if isinstance(error, exceptions.BotoCoreError):
        return str(error)
    return None
