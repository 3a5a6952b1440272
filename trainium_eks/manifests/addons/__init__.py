"""Charts of what runs in the cluster for every job: device plugins, TensorBoard, etcd, the Volcano queue, the Kubeflow
training runtime."""
