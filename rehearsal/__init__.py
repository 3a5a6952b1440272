"""The deploy rehearsal: what CloudFormation and the kubectl handler of aws-eks-v2 would do between two templates,
offline, with the handler's real code, and what the cluster then does with the objects. A test tool of this
repository, not part of the installed library (``pyproject.toml`` packages ``trainium_eks`` only).

- :mod:`.cfn_changes`: CloudFormation's action per resource (create, update, replace, delete, retain) and their
  order (deletions in parallel waves), from the CloudFormation registry schemas that cfn-lint ships;
- :mod:`.delete_needs`: what a delete needs that the template does not say (the kubectl handler's network path,
  Karpenter's controller policy, what a retained resource keeps in use);
- :mod:`.intrinsics`: the values CloudFormation would pass (``Ref``, ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Sub``, ...);
- :mod:`.handler`: the kubectl/Helm handler extracted from the installed aws-cdk-lib, run with fake commands;
- :mod:`.fake_commands`: the recording ``aws``, ``kubectl`` and ``helm``;
- :mod:`.cluster_model`: the clusters' objects and Helm releases, changed with kubectl's and Helm's semantics;
- :mod:`.kubectl_prune` and :mod:`.kubectl_probe`: kubectl's default prune allow-list, checked against the layer's
  real kubectl;
- :mod:`.scenario`, :mod:`.promises`, :mod:`.scenarios`, :mod:`.report`: scenarios of the default app, the promises
  they keep and the printed tables (``make rehearse``, ``scripts/rehearse.py``).
"""
