"""Tests of the default app as a whole: its snapshots, `cdk synth`, the validators, data safety, composition and the
property tests of every prop."""
