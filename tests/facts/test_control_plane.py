"""The e2e components' pins agree with their Go modules and with what the stacks deploy."""

from __future__ import annotations

import re

import pytest

from e2e.build import MODULES
from trainium_eks.facts import control_plane, versions
from trainium_eks.facts.control_plane import COMPONENTS


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.name)
def test_each_go_module_requires_the_pinned_version_and_builds_its_binaries_as_tools_or_its_own(component):
    go_mod = (MODULES / component.name / "go.mod").read_text()
    assert re.search(rf"^\s*(require\s+)?{re.escape(component.module)} {re.escape(component.version)}\b", go_mod, re.M)
    own = f"trainium-eks/e2e/modules/{component.name}/"
    for _, package in component.binaries:
        if package.startswith(own):  # a main package of our own, in the module's folder
            assert (MODULES / component.name / package.removeprefix(own) / "main.go").is_file(), package
        else:
            assert re.search(rf"^\s*(tool\s+)?{re.escape(package)}$", go_mod, re.M), package
    assert (MODULES / component.name / "go.sum").is_file()


def test_the_control_plane_is_the_patch_release_of_the_stacks_kubernetes_version():
    assert control_plane.KUBERNETES_PATCH.startswith(f"v{versions.DEFAULT_KUBERNETES_VERSION}.")
    assert versions.KUBECTL_LAYER_TOOLS["kubectl"] == control_plane.KUBERNETES_PATCH.lstrip("v")
