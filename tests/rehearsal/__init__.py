"""Tests of the deploy rehearsal (rehearsal/) and of what it proves about the stacks."""
