"""TensorBoardChart: reads the shared volume and is not exposed outside the cluster."""

from tests.support.charts import objects, pod_spec
from trainium_eks.manifests.addons.tensorboard import TensorBoardChart


def test_tensorboard_reads_the_shared_volume_and_is_not_exposed():
    found = objects(TensorBoardChart())
    assert found["Service", "tensorboard"]["spec"]["type"] == "ClusterIP"
    spec = pod_spec(found["Deployment", "tensorboard"])
    (container,) = spec["containers"]
    assert container["command"] == ["tensorboard"]
    assert "--logdir=/data/output" in container["args"]
    assert {"name": "shared", "mountPath": "/data", "readOnly": True} in container["volumeMounts"]
    shared = next(v for v in spec["volumes"] if v["name"] == "shared")
    assert shared["persistentVolumeClaim"]["claimName"] == "fsx-claim"
    assert spec["nodeSelector"] == {"trainium-eks/node-role": "system"}
