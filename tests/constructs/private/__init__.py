"""Tests of trainium_eks.constructs.private, the constructs' internals."""
