"""The deploy rehearsal: what CloudFormation would do between two templates, offline, and the parts of AWS and the
cluster that no component can run offline (node room, the VPC CNI's network policies, the scheduling of every
arrival order). A test tool of this repository, not part of the installed library (``pyproject.toml`` packages
``trainium_eks`` only). What the kubectl handler, the API server, the admission webhooks and the controllers do, the
end-to-end tests (``e2e/``, ``make e2e``) run on the real components; they use this package's CloudFormation plan.

- :mod:`.cfn_changes`: CloudFormation's action per resource (create, update, replace, delete, retain) and their
  order (deletions in parallel waves), from the CloudFormation registry schemas that cfn-lint ships;
- :mod:`.delete_needs`: what a delete needs that the template does not say (the kubectl handler's network path,
  Karpenter's controller policy, what a retained resource keeps in use);
- :mod:`.intrinsics`: the values CloudFormation would pass (``Ref``, ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Sub``, ...);
- :mod:`.handler`: the kubectl/Helm handler extracted from the installed aws-cdk-lib, and the CloudFormation events
  it gets (the end-to-end tests run it with the layer's real kubectl and Helm);
- :mod:`.kubectl_prune` and :mod:`.kubectl_probe`: kubectl's default prune allow-list, checked against the layer's
  real kubectl;
- :mod:`.scenario`, :mod:`.promises`, :mod:`.scenarios`, :mod:`.report`: scenarios of the default app, the promises
  they keep and the printed tables (``make rehearse``, ``scripts/rehearse.py``);
- :mod:`.security_group_rules` and :mod:`.subnet_cidrs`: what EC2 refuses on the way (a duplicate rule, an
  overlapping subnet) while CloudFormation creates before it deletes;
- :mod:`.scheduling_run` and the modules it names: the scheduling model (every arrival order of a stack's jobs);
  :mod:`.node_capacity`: the room EKS leaves on a node; :mod:`.network_policy`: the VPC CNI's policy agent;
  :mod:`.kubelet_expansion`: the kubelet's ``$(VAR)`` expansion.
"""
