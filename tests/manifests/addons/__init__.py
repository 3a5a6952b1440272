"""Tests of trainium_eks.manifests.addons."""
