"""Tests of trainium_eks.manifests.jobs."""
