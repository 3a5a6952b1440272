"""Tests of trainium_eks.manifests.access."""
