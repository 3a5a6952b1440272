"""ComposerRecipe: validation against Composer 0.32.1's algorithms, presets, and the JSON the training script reads.

The table itself is checked against the installed Composer's constructors in tests/images/test_composer_resnet.py.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
from pathlib import Path
from typing import Any, Dict, List

import pytest

from trainium_eks.core.validation import ConfigurationError
from trainium_eks.workloads.composer_recipe import (
    ALGORITHMS,
    PRESETS,
    Algorithm,
    ComposerRecipe,
    allowed_algorithms,
)

SCRIPT = Path(__file__).resolve().parents[2] / "images" / "composer-resnet" / "train_composer.py"


def load_script() -> Any:
    """train_composer.py as a module; it imports only the standard library until training starts."""
    spec = importlib.util.spec_from_file_location("train_composer", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def problems_of(*algorithms: Algorithm, domain: str = "image") -> List[str]:
    with pytest.raises(ConfigurationError) as caught:
        ComposerRecipe(list(algorithms), domain)
    return caught.value.problems


def only_problem(*algorithms: Algorithm, domain: str = "image") -> str:
    problems = problems_of(*algorithms, domain=domain)
    assert len(problems) == 1, problems
    return problems[0]


# ------------------------------------------------------------------------------------------------ presets


def test_presets() -> None:
    assert ComposerRecipe.preset("baseline").names == ()
    assert ComposerRecipe.preset("baseline").to_json() == "[]"
    assert ComposerRecipe.preset("mild").names == (
        "BlurPool",
        "ChannelsLast",
        "EMA",
        "LabelSmoothing",
        "ProgressiveResizing",
    )
    assert ComposerRecipe.preset("medium").names == ComposerRecipe.preset("mild").names + ("MixUp", "SAM")


def test_mild_preset_has_the_mosaic_resnet_settings() -> None:
    mild = {a.name: dict(a.kwargs) for a in PRESETS["mild"]}
    assert mild["BlurPool"] == {"replace_convs": True, "replace_maxpools": True, "blur_first": True, "min_channels": 16}
    assert mild["EMA"] == {"half_life": "100ba", "update_interval": "20ba"}
    assert mild["LabelSmoothing"] == {"smoothing": 0.08}
    assert mild["ProgressiveResizing"]["initial_scale"] == 0.5
    medium = {a.name: dict(a.kwargs) for a in PRESETS["medium"]}
    assert medium["LabelSmoothing"] == {"smoothing": 0.1}
    assert medium["SAM"] == {"rho": 0.5, "epsilon": 1.0e-12, "interval": 10}


def test_unknown_preset_lists_the_presets() -> None:
    with pytest.raises(ConfigurationError, match="preset='hot': one of baseline, mild, medium"):
        ComposerRecipe.preset("hot")


def test_only_the_baseline_preset_suits_a_text_model() -> None:
    assert ComposerRecipe.preset("baseline", domain="text").names == ()
    with pytest.raises(ConfigurationError) as caught:
        ComposerRecipe.preset("mild", domain="text")
    assert len(caught.value.problems) == 3  # BlurPool, ChannelsLast, ProgressiveResizing; EMA and smoothing suit text


# ------------------------------------------------------------------------------------------------ names and domains


def test_unknown_algorithm_lists_every_algorithm() -> None:
    problem = only_problem(Algorithm("StochasticWeightAveraging"))
    assert problem.startswith("algorithms[0].name='StochasticWeightAveraging': not an algorithm of Composer 0.32.1")
    assert problem.endswith("allowed: " + ", ".join(sorted(ALGORITHMS)))
    assert "NoOpModel" not in problem


def test_names_are_case_sensitive_with_a_hint() -> None:
    assert "(names are case-sensitive: 'Alibi')" in only_problem(Algorithm("ALiBi"), domain="text")


@pytest.mark.parametrize("name", ["BlurPool", "CutMix", "MixUp", "ChannelsLast", "RandAugment"])
def test_image_algorithm_on_a_text_model_lists_the_text_algorithms(name: str) -> None:
    problem = only_problem(Algorithm(name), domain="text")
    assert f"made for image models, not text models; allowed for text: {', '.join(allowed_algorithms('text'))}" in (
        problem
    )
    assert "Alibi" in problem and "BlurPool" not in problem.split("allowed")[1]


@pytest.mark.parametrize(
    "algorithm",
    [Algorithm("Alibi", {"max_sequence_length": 512}), Algorithm("SeqLengthWarmup"), Algorithm("GatedLinearUnits")],
)
def test_text_algorithm_on_an_image_model_lists_the_image_algorithms(algorithm: Algorithm) -> None:
    problem = only_problem(algorithm)
    assert f"made for text models, not image models; allowed for image: {', '.join(allowed_algorithms('image'))}" in (
        problem
    )


def test_model_agnostic_algorithms_suit_both_domains() -> None:
    agnostic = set(allowed_algorithms("image")) & set(allowed_algorithms("text"))
    assert agnostic == {
        "EMA",
        "SWA",
        "SAM",
        "GradientClipping",
        "LayerFreezing",
        "LabelSmoothing",
        "SelectiveBackprop",
        "Factorize",
    }
    clipping = Algorithm("GradientClipping", {"clipping_type": "norm", "clipping_threshold": 1.0})
    for domain in ("image", "text"):
        assert ComposerRecipe([Algorithm("EMA"), Algorithm("LabelSmoothing"), clipping], domain).domain == domain


def test_unknown_domain() -> None:
    assert only_problem(Algorithm("EMA"), domain="audio") == "domain='audio': one of 'image', 'text'"


# ------------------------------------------------------------------------------------------------ parameters


def test_unknown_keyword_lists_the_parameters() -> None:
    assert only_problem(Algorithm("BlurPool", {"replace_conv": True})) == (
        "BlurPool.replace_conv=True: not a parameter of BlurPool; allowed: blur_first, min_channels, replace_convs, "
        "replace_maxpools"
    )
    assert "allowed: none (it takes no parameters)" in only_problem(Algorithm("ChannelsLast", {"enabled": True}))


@pytest.mark.parametrize(
    "name, kwargs, expected",
    [
        ("BlurPool", {"min_channels": True}, "BlurPool.min_channels=True: an int >= 0 (default 16)"),
        ("BlurPool", {"min_channels": -1}, "BlurPool.min_channels=-1: an int >= 0 (default 16)"),
        (
            "GhostBatchNorm",
            {"ghost_batch_size": 32.0},
            "GhostBatchNorm.ghost_batch_size=32.0: an int >= 1 (default 32)",
        ),
        ("MixUp", {"alpha": "0.2"}, "MixUp.alpha='0.2': a number > 0 (default 0.2)"),
        ("MixUp", {"alpha": 0}, "MixUp.alpha=0: a number > 0 (default 0.2)"),
        ("MixUp", {"alpha": math.nan}, "MixUp.alpha=nan: a number > 0 (default 0.2)"),
        ("LabelSmoothing", {"smoothing": 1.0}, "LabelSmoothing.smoothing=1.0: a number in [0, 1) (default 0.1)"),
        ("CutOut", {"length": 0}, "CutOut.length=0: a number in (0, 1) (default 0.5)"),
        ("RandAugment", {"severity": 11}, "RandAugment.severity=11: an int in [0, 10] (default 9)"),
        ("BlurPool", {"blur_first": "yes"}, "BlurPool.blur_first='yes': a bool (default true)"),
        ("SWA", {"anneal_strategy": "step"}, "SWA.anneal_strategy='step': one of 'linear', 'lin', 'cos', 'cosine'"),
        ("EMA", {"half_life": "0.5dur"}, "EMA.half_life='0.5dur': a time string in ba/ep (e.g. '10ba') or null"),
        ("EMA", {"ema_start": "1.5ep"}, "EMA.ema_start='1.5ep': a time string in dur/ep/ba/sp/tok/iter"),
        ("SAM", {"rho": None}, "SAM.rho=None: a number > 0 (default 0.05)"),
        ("ColOut", {"resize_target": "yes"}, "ColOut.resize_target='yes': true, false or 'auto' (default \"auto\")"),
        ("MixUp", {"target_key": -1}, "MixUp.target_key=-1: an int >= 0 or a non-empty string (the batch key)"),
        ("StochasticDepth", {"target_layer_name": "BasicBlock"}, "one of 'ResNetBottleneck' (required)"),
    ],
)
def test_wrong_type_or_out_of_range_values(name: str, kwargs: Dict[str, Any], expected: str) -> None:
    assert expected in only_problem(Algorithm(name, kwargs))


def test_missing_required_parameters() -> None:
    assert problems_of(Algorithm("GradientClipping")) == [
        "GradientClipping.clipping_type=None: missing; one of 'adaptive', 'norm', 'value' (required)",
        "GradientClipping.clipping_threshold=None: missing; a number > 0 (required)",
    ]


@pytest.mark.parametrize(
    "algorithm, expected",
    [
        (
            Algorithm("BlurPool", {"replace_convs": False, "replace_maxpools": False}),
            "replace_convs or replace_maxpools",
        ),
        (Algorithm("ProgressiveResizing", {"delay_fraction": 0.9}), "delay_fraction + finetune_fraction must be <= 1"),
        (Algorithm("EMA", {"smoothing": 0.99}), "set exactly one of half_life and smoothing"),
        (Algorithm("EMA", {"half_life": "2ep", "update_interval": "20ba"}), "must have the same unit"),
        (Algorithm("SWA", {"swa_start": "0.9dur", "swa_end": "0.5dur"}), "swa_start must come before swa_end"),
        (Algorithm("SWA", {"swa_start": "10ep"}), "in the same unit"),
        (Algorithm("SelectiveBackprop", {"start": 0.9, "end": 0.5}), "start must be smaller than end"),
        (Algorithm("ColOut", {"batch": False, "resize_target": True}), "resize_target=true needs batch=true"),
        (Algorithm("GyroDropout", {"sigma": 8, "tau": 16}), "tau (concurrent subnetworks) must be <= sigma"),
        (
            Algorithm(
                "StochasticDepth",
                {"target_layer_name": "ResNetBottleneck", "stochastic_method": "sample", "drop_warmup": "0.1dur"},
            ),
            "drop_warmup must be 0 with stochastic_method='sample'",
        ),
    ],
)
def test_contradicting_parameters(algorithm: Algorithm, expected: str) -> None:
    assert expected in only_problem(algorithm)


def test_valid_settings_are_accepted() -> None:
    recipe = ComposerRecipe(
        [
            Algorithm("EMA", {"half_life": None, "smoothing": 0.999, "update_interval": "1ep"}),
            Algorithm("SWA", {"swa_start": "10ep", "swa_end": "20ep", "swa_lr": 0.05}),
            Algorithm("StochasticDepth", {"target_layer_name": "ResNetBottleneck", "drop_warmup": "0.1dur"}),
            Algorithm("ColOut", {"resize_target": False, "batch": False}),
            Algorithm("Factorize", {"latent_channels": 64, "latent_features": 0.5}),
            Algorithm("MixUp", {"alpha": 1, "input_key": "image", "target_key": "label"}),
        ]
    )
    assert recipe.names[0] == "EMA"


def test_a_value_error_skips_the_rules_of_that_algorithm() -> None:
    # One problem, not also "replace_convs or replace_maxpools must be true".
    assert only_problem(Algorithm("BlurPool", {"replace_convs": "no", "replace_maxpools": False})).startswith(
        "BlurPool.replace_convs='no'"
    )


# ------------------------------------------------------------------------------------------------ the whole recipe


def test_every_problem_in_one_error() -> None:
    with pytest.raises(ConfigurationError) as caught:
        ComposerRecipe(
            [
                Algorithm("Blurpool"),
                Algorithm("Alibi", {"max_sequence_length": 128}),
                Algorithm("MixUp", {"alpha": -1, "beta": 1}),
                "LabelSmoothing",
                Algorithm("GradientClipping", {"clipping_type": "norm"}),
                Algorithm("MixUp"),
            ]
        )
    error = caught.value
    assert error.problems == [
        error.problems[0],
        error.problems[1],
        "MixUp.alpha=-1: a number > 0 (default 0.2)",
        "MixUp.beta=1: not a parameter of MixUp; allowed: alpha, input_key, interpolate_loss, target_key",
        "algorithms[3]='LabelSmoothing': an Algorithm(name, kwargs), e.g. Algorithm(\"BlurPool\", {})",
        "GradientClipping.clipping_threshold=None: missing; a number > 0 (required)",
        "algorithms[5].name='MixUp': already at algorithms[2]; each algorithm at most once",
    ]
    assert error.problems[0].startswith("algorithms[0].name='Blurpool': not an algorithm")
    assert error.problems[1].startswith("algorithms[1].name='Alibi': made for text models")
    assert str(error).startswith("ComposerRecipe: 7 configuration problems:\n  - algorithms[0].name='Blurpool'")


def test_recipe_is_an_immutable_value() -> None:
    recipe = ComposerRecipe([Algorithm("BlurPool", {"min_channels": 16}), Algorithm("ChannelsLast")])
    assert recipe == ComposerRecipe((Algorithm("BlurPool", {"min_channels": 16}), Algorithm("ChannelsLast")))
    assert hash(recipe) == hash(ComposerRecipe.from_json(recipe.to_json()))
    assert isinstance(recipe.algorithms, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        recipe.domain = "text"
    with pytest.raises(TypeError):
        recipe.algorithms[0].kwargs["min_channels"] = 0


def test_json_round_trip() -> None:
    recipe = ComposerRecipe.preset("medium")
    text = recipe.to_json()
    assert ComposerRecipe.from_json(text).algorithms == recipe.algorithms, "the schedule is a separate argument"
    assert recipe.scale_schedule_ratio == 1.5 and ComposerRecipe.preset("mild").scale_schedule_ratio == 0.4
    assert json.loads(text)[0] == {
        "kwargs": {"blur_first": True, "min_channels": 16, "replace_convs": True, "replace_maxpools": True},
        "name": "BlurPool",
    }
    assert ComposerRecipe.from_json('[{"name": "ChannelsLast"}]').algorithms == (Algorithm("ChannelsLast"),)


def test_from_json_refuses_other_shapes() -> None:
    with pytest.raises(ConfigurationError, match=r"recipe='\[': JSON \(Expecting value at character 1\)"):
        ComposerRecipe.from_json("[")
    with pytest.raises(ConfigurationError, match="a JSON list of"):
        ComposerRecipe.from_json('{"name": "BlurPool"}')
    with pytest.raises(ConfigurationError) as caught:
        ComposerRecipe.from_json('["BlurPool", {"name": "MixUp", "args": {}}, {"name": "EMA", "kwargs": []}]')
    assert [p.split("=")[0] for p in caught.value.problems] == ["recipe[0]", "recipe[1]", "recipe[2]"]


# ------------------------------------------------------------------------------------------------ the script's side


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_the_script_parses_what_the_library_writes(preset: str) -> None:
    recipe = ComposerRecipe.preset(preset)
    assert load_script().parse_recipe(recipe.to_json()) == [a.to_dict() for a in recipe.algorithms]


def test_the_script_parses_kwargs_left_out_and_refuses_what_the_library_refuses() -> None:
    script = load_script()
    assert script.parse_recipe('[{"name": "ChannelsLast"}]') == [{"name": "ChannelsLast", "kwargs": {}}]
    for text, message in [
        ("[", "not JSON"),
        ('{"name": "BlurPool"}', "must be a JSON list"),
        ('[{"name": "MixUp", "args": {}}]', r"recipe\[0\] must be"),
        ('[{"name": "MixUp"}, {"name": "MixUp"}]', "repeated: MixUp"),
    ]:
        with pytest.raises(ValueError, match=message):
            script.parse_recipe(text)


def test_the_script_reads_a_recipe_file(tmp_path: Path) -> None:
    script = load_script()
    recipe_file = tmp_path / "recipe.json"
    recipe_file.write_text(ComposerRecipe.preset("mild").to_json())
    args = script.build_parser().parse_args(["--data-dir=d", "--output-dir=o", f"--recipe-file={recipe_file}"])
    assert [item["name"] for item in script.read_recipe(args)] == list(ComposerRecipe.preset("mild").names)
    assert script.read_recipe(script.build_parser().parse_args(["--data-dir=d", "--output-dir=o"])) == []


def test_the_script_refuses_two_recipes_and_a_bad_one(capsys: pytest.CaptureFixture[str]) -> None:
    script = load_script()
    with pytest.raises(SystemExit):
        script.build_parser().parse_args(["--data-dir=d", "--output-dir=o", "--recipe=[]", "--recipe-file=r.json"])
    with pytest.raises(SystemExit):
        script.main(["--data-dir=d", "--output-dir=o", "--recipe=[1]"])
    assert "recipe[0] must be" in capsys.readouterr().err


def test_the_script_stops_before_training_when_the_data_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = load_script()
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    (folder / "data_batch_1").write_bytes(b"")
    with pytest.raises(SystemExit):
        script.main([f"--data-dir={tmp_path}", f"--output-dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert "never downloads it" in err
    assert f"Missing: {folder / 'data_batch_2'}," in err and str(folder / "test_batch") in err
    assert str(folder / "data_batch_1") not in err
    assert not (tmp_path / "out").exists()


def test_the_script_reads_the_batches_from_the_data_dir_itself_as_the_staging_job_leaves_them(tmp_path: Path) -> None:
    script = load_script()
    (tmp_path / "data_batch_1").write_bytes(b"")
    files = script.cifar_files(tmp_path)
    assert files["train"][0] == tmp_path / "data_batch_1" and files["test"] == [tmp_path / "test_batch"]
    nested = tmp_path / "cifar-10-batches-py"
    nested.mkdir()
    assert script.cifar_files(tmp_path)["test"] == [nested / "test_batch"], "the archive's folder when it is there"
