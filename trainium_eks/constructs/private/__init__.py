"""Internals of the constructs: the parts of a construct that are not themselves constructs. Not public API."""
