"""Tests of trainium_eks.constructs, one module per construct."""
