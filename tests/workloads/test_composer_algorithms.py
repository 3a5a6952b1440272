"""Composer 0.32.1's algorithm table and check_algorithm, the check of one algorithm of a recipe."""

import pytest

from trainium_eks.core.validation import Problems
from trainium_eks.workloads.composer_algorithms import ALGORITHMS, DOMAINS, allowed_algorithms, check_algorithm


def problems_of(name, kwargs, domain="image"):
    problems = Problems("recipe")
    check_algorithm(problems, "algorithms[0]", name, kwargs, domain)
    return list(problems)


def test_each_domain_allows_its_algorithms_and_the_agnostic_ones_sorted():
    for domain in DOMAINS:
        allowed = allowed_algorithms(domain)
        assert list(allowed) == sorted(allowed)
        assert {"EMA", "LabelSmoothing"} <= set(allowed)
    assert "BlurPool" in allowed_algorithms("image") and "BlurPool" not in allowed_algorithms("text")
    assert "Alibi" in allowed_algorithms("text") and "Alibi" not in allowed_algorithms("image")
    assert set(allowed_algorithms("image")) | set(allowed_algorithms("text")) == set(ALGORITHMS)


def test_a_valid_algorithm_adds_no_problem():
    assert problems_of("BlurPool", {"min_channels": 32}) == []
    assert problems_of("Alibi", {"max_sequence_length": 512}, domain="text") == []


@pytest.mark.parametrize(
    "name,kwargs,domain,expected",
    [
        ("Blurpool", {}, "image", "names are case-sensitive: 'BlurPool'"),
        ("Alibi", {"max_sequence_length": 512}, "image", "made for text models, not image models"),
        ("BlurPool", {"radius": 2}, "image", "not a parameter of BlurPool"),
        ("LabelSmoothing", {"smoothing": 1}, "image", "LabelSmoothing.smoothing=1"),
        ("Alibi", {}, "text", "missing"),
        ("EMA", {"half_life": "10ba", "smoothing": 0.9}, "image", "set exactly one of half_life and smoothing"),
    ],
)
def test_each_kind_of_problem_is_named(name, kwargs, domain, expected):
    found = problems_of(name, kwargs, domain)
    assert found and any(expected in problem for problem in found), found
