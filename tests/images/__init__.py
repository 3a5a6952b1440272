"""Tests of the training images' own code (images/), run outside a container."""
