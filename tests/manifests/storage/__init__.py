"""Tests of trainium_eks.manifests.storage."""
