"""MosaicML Composer recipes: which speed-up algorithms a Composer training script applies, checked at synth time.

A :class:`ComposerRecipe` is a list of :class:`Algorithm` (a Composer algorithm class name and its constructor
keyword arguments) for a model of one domain, ``"image"`` or ``"text"``. It is checked against the algorithms that
Composer 0.32.1 (the last release, July 2025) ships in ``composer.algorithms``
(:mod:`trainium_eks.workloads.composer_algorithms`). Every problem is reported at once, as one
:class:`~trainium_eks.core.validation.ConfigurationError`.

:meth:`ComposerRecipe.to_json` gives the argument of the training script ``images/composer-resnet/train_composer.py``
(``--recipe '<json>'``): a JSON list of ``{"name": ..., "kwargs": {...}}``; an empty list is the baseline. The
library only describes the recipe: Composer is imported by the training script in its image, never here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from trainium_eks.core.validation import ConfigurationError, Problems
from trainium_eks.workloads.composer_algorithms import (
    ALGORITHMS,
    COMPOSER_VERSION,
    DOMAINS,
    allowed_algorithms,
    check_algorithm,
    is_number,
)

__all__ = [
    "ALGORITHMS",
    "COMPOSER_VERSION",
    "DOMAINS",
    "PRESETS",
    "PRESET_SCHEDULES",
    "Algorithm",
    "ComposerRecipe",
    "allowed_algorithms",
]


@dataclass(frozen=True)
class Algorithm:
    """One Composer algorithm of a recipe.

    :param name: The class name in ``composer.algorithms`` (case-sensitive), e.g. ``"BlurPool"``.
    :param kwargs: Constructor keyword arguments; parameters left out take Composer's defaults. Default: none.
    """

    name: str
    kwargs: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kwargs", MappingProxyType(dict(self.kwargs)))

    def to_dict(self) -> Dict[str, Any]:
        """The JSON form: ``{"name": ..., "kwargs": {...}}``."""
        return {"name": self.name, "kwargs": dict(self.kwargs)}


def _algorithms(*items: Tuple[str, Mapping[str, Any]]) -> Tuple[Algorithm, ...]:
    return tuple(Algorithm(name, kwargs) for name, kwargs in items)


_MILD = (
    ("BlurPool", {"replace_convs": True, "replace_maxpools": True, "blur_first": True, "min_channels": 16}),
    ("ChannelsLast", {}),
    ("EMA", {"half_life": "100ba", "update_interval": "20ba"}),
    ("LabelSmoothing", {"smoothing": 0.08}),
    (
        "ProgressiveResizing",
        {
            "mode": "resize",
            "initial_scale": 0.5,
            "delay_fraction": 0.4,
            "finetune_fraction": 0.2,
            "size_increment": 4,
            "resize_targets": False,
        },
    ),
)

PRESETS: Mapping[str, Tuple[Algorithm, ...]] = MappingProxyType(
    {
        "baseline": (),
        "mild": _algorithms(*_MILD),
        "medium": _algorithms(
            *_MILD[:3],
            ("LabelSmoothing", {"smoothing": 0.1}),
            _MILD[4],
            ("MixUp", {"alpha": 0.2, "interpolate_loss": False}),
            ("SAM", {"rho": 0.5, "epsilon": 1.0e-12, "interval": 10}),
        ),
    }
)
"""Named image recipes.

``baseline``: no algorithm. ``mild`` and ``medium``: the algorithms and settings of MosaicML's "Mosaic ResNet"
recipes for ResNet-50 on ImageNet (``composer/yamls/recipes/resnet50_mild.yaml`` and ``resnet50_medium.yaml`` in
mosaicml/composer, added in June 2022 and removed with the YAML configs in v0.12.0; the "Mosaic ResNet Deep Dive"
blog post): BlurPool, ChannelsLast, EMA (half-life 100 batches, updated every 20), label smoothing 0.08 and
progressive resizing from half size; ``medium`` smooths labels by 0.1 and adds MixUp (alpha 0.2) and SAM (rho 0.5,
every 10 steps). Their learning rate and batch size are the script's arguments, not the recipe's; their schedule is
:data:`PRESET_SCHEDULES`.
"""

PRESET_SCHEDULES: Mapping[str, float] = MappingProxyType({"baseline": 1.0, "mild": 0.4, "medium": 1.5})
"""``scale_schedule_ratio`` of each preset: the share of the baseline's training length it trains for. MosaicML's
recipes save time by training a shorter schedule to about the same accuracy, not by being faster per epoch: their
YAMLs train 90 epochs scaled by 0.4 (mild, 36 epochs), 1.5 (medium, 135: more accurate than the baseline) and 3 (270)
(mosaicml/composer v0.11.1 ``composer/yamls/recipes/resnet50_{mild,medium,spicy}.yaml``, ``scale_schedule_ratio``;
baseline ``composer/yamls/models/resnet50.yaml``, 90 epochs, 76.5 %). Composer scales ``max_duration`` and the
learning-rate schedule by it (Trainer ``scale_schedule_ratio``, v0.32.1 ``composer/trainer/trainer.py``)."""


@dataclass(frozen=True)
class ComposerRecipe:
    """The Composer algorithms a training script applies, validated for the model's domain.

    :param algorithms: The algorithms, applied by Composer in its own order; each at most once. Default: none (the
        baseline).
    :param domain: The model's domain, one of :data:`DOMAINS`. Default: ``"image"``.
    :param scale_schedule_ratio: The share of the baseline's training length the recipe trains for (Composer's
        ``scale_schedule_ratio``: ``max_duration`` and the learning-rate schedule, not the warm-up), in (0, 10].
        Default: 1.0.
    :raises ConfigurationError: listing every problem: an unknown algorithm (with the allowed names), one not made
        for ``domain`` (with the algorithms allowed for it), a repeated algorithm, an unknown parameter (with the
        allowed ones), a value of the wrong type or out of range, a missing required parameter, or parameters that
        contradict each other.
    """

    algorithms: Sequence[Algorithm] = ()
    domain: str = "image"
    scale_schedule_ratio: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "algorithms", tuple(self.algorithms))
        problems = Problems("ComposerRecipe")
        ratio = self.scale_schedule_ratio
        if not is_number(ratio) or not 0 < ratio <= 10:
            problems.add("scale_schedule_ratio", ratio, "a number in (0, 10]: the share of the baseline's schedule")
        if self.domain not in DOMAINS:
            problems.add("domain", self.domain, "one of " + ", ".join(repr(d) for d in DOMAINS))
        seen: Dict[str, int] = {}
        for index, algorithm in enumerate(self.algorithms):
            where = f"algorithms[{index}]"
            if not isinstance(algorithm, Algorithm):
                problems.add(where, algorithm, 'an Algorithm(name, kwargs), e.g. Algorithm("BlurPool", {})')
                continue
            if algorithm.name in seen:
                problems.add(
                    f"{where}.name",
                    algorithm.name,
                    f"already at algorithms[{seen[algorithm.name]}]; each algorithm at most once",
                )
            seen.setdefault(algorithm.name, index)
            check_algorithm(problems, where, algorithm.name, algorithm.kwargs, self.domain)
        problems.raise_if_any()

    @property
    def names(self) -> Tuple[str, ...]:
        """The algorithm names, in recipe order."""
        return tuple(a.name for a in self.algorithms)

    def to_json(self) -> str:
        """The recipe as the training script's ``--recipe`` argument: a JSON list of ``{"name", "kwargs"}``."""
        return json.dumps([a.to_dict() for a in self.algorithms], sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, *, domain: str = "image") -> "ComposerRecipe":
        """The recipe of a ``--recipe`` argument (see :meth:`to_json`), validated for ``domain``.

        :raises ConfigurationError: when ``text`` is not such a JSON list, or the recipe is not valid.
        """
        problems = Problems("ComposerRecipe")
        try:
            items = json.loads(text)
        except json.JSONDecodeError as err:
            problems.add("recipe", text, f"JSON ({err.msg} at character {err.pos})")
            items = []
        if not isinstance(items, list):
            problems.add("recipe", text, 'a JSON list of {"name": ..., "kwargs": {...}}')
            items = []
        algorithms: List[Algorithm] = []
        for index, item in enumerate(items):
            if not (
                isinstance(item, dict)
                and isinstance(item.get("name"), str)
                and set(item) <= {"name", "kwargs"}
                and isinstance(item.get("kwargs", {}), dict)
            ):
                problems.add(f"recipe[{index}]", item, 'an object {"name": <string>, "kwargs": <object>}')
                continue
            algorithms.append(Algorithm(item["name"], item.get("kwargs", {})))
        problems.raise_if_any()
        return cls(algorithms, domain)

    @classmethod
    def preset(cls, name: str, *, domain: str = "image") -> "ComposerRecipe":
        """The named recipe of :data:`PRESETS` (``baseline``, ``mild``, ``medium``), at its schedule
        (:data:`PRESET_SCHEDULES`).

        :raises ConfigurationError: for an unknown name, listing the presets; or when the preset's algorithms are
            not for ``domain`` (only ``baseline`` suits ``"text"``).
        """
        if name not in PRESETS:
            raise ConfigurationError("ComposerRecipe", [f"preset={name!r}: one of {', '.join(PRESETS)}"])
        return cls(PRESETS[name], domain, PRESET_SCHEDULES[name])
