"""Tests of trainium_eks.commands, the command-line tools."""
