"""scripts/bench_synth.py: the stand-in Neuron manifests it serves to the peer (bench/blueprints), without a synth."""

import importlib.util
import urllib.request

import yaml

from tests.support.apps import REPO

SPEC = importlib.util.spec_from_file_location("bench_synth", REPO / "scripts" / "bench_synth.py")
bench_synth = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench_synth)


def test_stand_ins_are_the_kinds_the_neuron_add_on_applies():
    kinds = {
        name: [document["kind"] for document in yaml.safe_load_all(text)]
        for name, text in bench_synth.NEURON_STAND_INS.items()
    }
    assert kinds == {
        "k8s-neuron-device-plugin-rbac.yml": ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"],
        "k8s-neuron-device-plugin.yml": ["DaemonSet"],
    }


def test_the_peer_maps_exactly_the_served_file_names():
    app = (bench_synth.PEER / "app.js").read_text()
    for name in bench_synth.NEURON_STAND_INS:
        assert f'"{name}"' in app


def test_stand_ins_are_served_on_loopback(tmp_path):
    server, base_url = bench_synth.serve_stand_ins(tmp_path)
    try:
        assert base_url.startswith("http://127.0.0.1:")
        for name, text in bench_synth.NEURON_STAND_INS.items():
            with urllib.request.urlopen(base_url + name, timeout=5) as response:
                assert response.read().decode() == text
    finally:
        server.shutdown()


def test_every_variant_names_an_app_that_exists():
    for name, variant in bench_synth.VARIANTS.items():
        if "--app" in variant.arguments:
            script = variant.arguments[variant.arguments.index("--app") + 1].split()[-1]
            assert (variant.cwd / script).is_file(), f"{name}: {script} not in {variant.cwd}"


def test_each_app_is_measured_against_the_floor_of_its_own_language():
    floors = {bench_synth.FLOOR: "python", bench_synth.JS_FLOOR: "node"}
    for floor, runner in floors.items():
        assert runner in bench_synth.VARIANTS[floor].arguments[1].split()[0].rsplit("/", 1)[-1]
    assert " -O " in bench_synth.VARIANTS[bench_synth.FLOOR].arguments[1], "the floor runs as cdk.json runs app.py"
