"""Tests of trainium_eks.facts."""
