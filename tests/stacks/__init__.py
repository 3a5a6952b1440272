"""Tests of trainium_eks.stacks."""
