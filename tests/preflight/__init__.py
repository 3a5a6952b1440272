"""Tests of the preflight's Lambda source (``lambda/preflight``): the checks and the custom resource handler."""
