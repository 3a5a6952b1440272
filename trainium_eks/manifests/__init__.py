"""Charts: the in-cluster add-ons and the jobs as Kubernetes objects (plain Python, see ``chart.LibraryChart``),
applied to a cluster by ``AppliedChart`` (``ClusterAddons``, ``JobSequence``)."""
