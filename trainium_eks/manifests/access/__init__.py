"""Charts of who may do what in the cluster: the training namespace and service account, the release Jobs' and the
hybrid workflow's Roles."""
