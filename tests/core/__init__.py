"""Tests of trainium_eks.core."""
