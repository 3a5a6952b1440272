"""Tests of trainium_eks.workloads."""
