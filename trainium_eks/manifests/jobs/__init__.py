"""Charts of jobs: hash-named job charts (Volcano, Kubeflow TrainJob and PyTorchJob, data staging), the workload they
share, and the release Jobs that create held jobs."""
