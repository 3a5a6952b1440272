"""cdk8s charts: the in-cluster add-ons and the jobs, each in its own cdk8s app, applied by ``ClusterAddons`` and
``JobSequence`` (or by ``cluster.add_cdk8s_chart``)."""
