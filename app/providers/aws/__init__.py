"""EKS: tokens signed for a cluster, and IAM Identity Center (AWS SSO) logins (issue 32).

- ``command``: the ``aws eks get-token`` and ``aws-iam-authenticator token`` command lines and
  the environment they run with (stdlib only).
- ``profiles``: what an AWS profile is (IAM Identity Center, role chain, keys, ...), what
  kubetray serves and what it refuses.
- ``session``: botocore sessions that see the caller's AWS_* environment (never the agent's),
  with a credential chain fed by kubetray's SSO token store and in-memory role caches.
- ``token``: the token as AWS specifies it (``k8s-aws-v1.`` + a presigned GetCallerIdentity
  URL with ``x-k8s-aws-id`` signed in), made with botocore's signer.
- ``sso``: the device-code login, refresh and portal calls, through botocore's own
  ``sso-oidc``/``sso`` clients; ``cli_cache``: the AWS CLI's SSO cache, read once, never
  written.

botocore is imported only by ``session``, ``token`` and ``sso``, and only when an AWS identity
is used: the agent of someone without AWS never loads it.
"""
