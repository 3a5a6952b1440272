"""manifests.jobs.job_naming: base names, job names that carry a hash of the spec, and the name placeholder."""

import hashlib
import json

import pytest

from trainium_eks.core.conventions import OUTPUT_ROOT
from trainium_eks.core.validation import DNS1123_LABEL, Problems
from trainium_eks.facts.catalog import MAX_NODES_PER_MANAGED_NODE_GROUP
from trainium_eks.manifests.jobs.job_naming import (
    HASH_LENGTH,
    JOB_NAME,
    PLACEHOLDER,
    check_base_name,
    hashed_name,
    with_name,
)


def test_the_name_is_the_base_and_the_sha256_of_the_canonical_spec_whatever_its_key_order():
    spec = {"spec": {"b": [1, "x"], "a": None}, "metadata": {"name": PLACEHOLDER}}
    canonical = '{"metadata":{"name":"__JOB_NAME__"},"spec":{"a":null,"b":[1,"x"]}}'
    assert hashed_name("train", spec) == "train-" + hashlib.sha256(canonical.encode()).hexdigest()[:HASH_LENGTH]
    reordered = json.loads(json.dumps({"metadata": spec["metadata"], "spec": {"a": None, "b": [1, "x"]}}))
    assert hashed_name("train", reordered) == hashed_name("train", spec)
    assert hashed_name("train", {**spec, "spec": {"b": [1, "y"]}}) != hashed_name("train", spec)
    assert hashed_name("eval", spec).split("-", 1)[1] == hashed_name("train", spec).split("-", 1)[1]


def test_resolve_decides_what_is_hashed():
    seen = []

    def resolve(spec):
        seen.append(spec)
        return {"resolved": True}

    assert (
        hashed_name("a", {"x": 1}, resolve)
        == hashed_name("a", {"x": 2}, resolve)
        == hashed_name("a", {"resolved": True})
    )
    assert seen == [{"x": 1}, {"x": 2}]


def test_with_name_puts_the_name_wherever_the_placeholder_is_without_touching_the_spec():
    assert JOB_NAME == PLACEHOLDER
    spec = {
        "metadata": {"name": PLACEHOLDER},
        "args": ["--output-dir", f"{OUTPUT_ROOT}/{JOB_NAME}", f"{JOB_NAME}:{JOB_NAME}"],
        "env": [{"name": "RUN", "value": JOB_NAME}],
        "count": 2,
    }
    named = with_name(spec, "train-0123456789")
    assert named == {
        "metadata": {"name": "train-0123456789"},
        "args": ["--output-dir", f"{OUTPUT_ROOT}/train-0123456789", "train-0123456789:train-0123456789"],
        "env": [{"name": "RUN", "value": "train-0123456789"}],
        "count": 2,
    }
    assert spec["metadata"]["name"] == PLACEHOLDER, "the spec given is left as it was"


@pytest.mark.parametrize("name", ["a", "train", "bert-large-2", "a" * 28, "a1-b2"])
def test_a_base_name_of_at_most_28_characters_keeps_every_pod_name_a_host_name(name):
    problems = Problems("job")
    assert check_base_name(problems, name) and not problems
    job = hashed_name(name, {"spec": {}})
    longest_pod = f"{job}-node-{MAX_NODES_PER_MANAGED_NODE_GROUP - 1}-0"
    assert len(longest_pod) <= 63 and DNS1123_LABEL.fullmatch(longest_pod), longest_pod


@pytest.mark.parametrize("name", ["a" * 29, "1train", "-train", "train-", "Train", "train.v2", "train_v2", "", None])
def test_other_base_names_are_refused_saying_what_is_allowed(name):
    problems = Problems("job")
    assert check_base_name(problems, name) is False
    assert list(problems) == [f"name={name!r}: a lowercase DNS label of at most 28 characters, starting with a letter"]
