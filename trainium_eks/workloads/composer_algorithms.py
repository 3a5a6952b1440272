"""The algorithms of MosaicML Composer 0.32.1 a recipe may use: each constructor's parameters, defaults, allowed
values and the model domains it is made for, as that release defines them (read from the source at tag ``v0.32.1``;
the domains from the tags of each algorithm's ``README.md``: model surgery for convolutional networks and image-batch
transforms only make sense for an image model; ALiBi, sequence-length warmup, gated linear units and the
low-precision norms rewrite transformer language models).

:func:`check_algorithm` reports what is wrong with one algorithm of a recipe; the recipe itself is
:class:`~trainium_eks.workloads.composer_recipe.ComposerRecipe`. Not offered: Composer's test helper ``NoOpModel``, and
the parameters that take Python objects (``act_fn`` of ``GatedLinearUnits``, ``apply_at`` of the low-precision
norms, getter/setter pairs as ``input_key``/``target_key``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from trainium_eks.core.validation import Problems

COMPOSER_VERSION = "0.32.1"
"""The Composer release the algorithm table below describes (and the images pin)."""

DOMAINS: Tuple[str, ...] = ("image", "text")
"""The model domains a recipe can be for: image classification/segmentation CNNs, or transformer language models."""

_IMAGE = frozenset({"image"})
_TEXT = frozenset({"text"})
_ANY = frozenset(DOMAINS)

_REQUIRED = object()
_TIME_STRING = re.compile(r"^(\d+(?:\.\d+)?)(ep|ba|sp|tok|dur|iter|sec)$")


@dataclass(frozen=True)
class _Param:
    """One constructor parameter of a Composer algorithm, as a recipe may set it from JSON.

    :param kind: ``bool``, ``int``, ``number`` (int or float), ``choice`` (one of ``choices``), ``time`` (a
        Composer time string such as ``"100ba"`` in one of ``units``), ``fraction_or_time`` (a number in [0, 1] or
        a ``dur`` time string), ``bool_or_auto`` or ``key`` (a batch index >= 0 or a dict key).
    :param default: Composer's default; ``_REQUIRED`` when the constructor has none.
    :param low: Smallest allowed value (numbers), or None.
    :param high: Largest allowed value (numbers), or None.
    :param low_open: ``low`` itself is not allowed.
    :param high_open: ``high`` itself is not allowed.
    :param choices: The allowed strings of a ``choice``.
    :param units: The allowed units of a ``time``.
    :param nullable: ``null`` (None) is allowed.
    """

    kind: str
    default: Any = _REQUIRED
    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False
    high_open: bool = False
    choices: Tuple[str, ...] = ()
    units: Tuple[str, ...] = ()
    nullable: bool = False

    def describe(self) -> str:
        """What the parameter accepts, with its default."""
        if self.kind == "choice":
            text = "one of " + ", ".join(repr(c) for c in self.choices)
        elif self.kind == "time":
            example = "0.5dur" if self.units[0] == "dur" else f"10{self.units[0]}"
            text = f"a time string in {'/'.join(self.units)} (e.g. '{example}')"
        elif self.kind == "fraction_or_time":
            text = "a number in [0, 1] or a time string in dur (e.g. '0.1dur')"
        elif self.kind == "bool_or_auto":
            text = "true, false or 'auto'"
        elif self.kind == "key":
            text = "an int >= 0 or a non-empty string (the batch key)"
        else:
            text = {"bool": "a bool", "int": "an int", "number": "a number"}[self.kind] + self._range()
        if self.nullable:
            text += " or null"
        default = "required" if self.default is _REQUIRED else f"default {json.dumps(self.default)}"
        return f"{text} ({default})"

    def _range(self) -> str:
        if self.low is not None and self.high is not None:
            left = "(" if self.low_open else "["
            right = ")" if self.high_open else "]"
            return f" in {left}{_num(self.low)}, {_num(self.high)}{right}"
        if self.low is not None:
            return f" {'>' if self.low_open else '>='} {_num(self.low)}"
        return ""

    def accepts(self, value: Any) -> bool:
        """True when ``value`` (as parsed from JSON) is allowed."""
        if value is None:
            return self.nullable
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "choice":
            return isinstance(value, str) and value in self.choices
        if self.kind == "time":
            return _time_unit(value) in self.units
        if self.kind == "fraction_or_time":
            return _time_unit(value) == "dur" or (is_number(value) and 0 <= value <= 1)
        if self.kind == "bool_or_auto":
            return isinstance(value, bool) or value == "auto"
        if self.kind == "key":
            return (_is_int(value) and value >= 0) or (isinstance(value, str) and bool(value))
        if not (_is_int(value) if self.kind == "int" else is_number(value)):
            return False
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return self.high is None or (value < self.high or (not self.high_open and value == self.high))


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _time_unit(value: Any) -> Optional[str]:
    """The unit of a Composer time string (``"100ba"`` -> ``"ba"``), or None when ``value`` is not one.

    ``dur`` is a fraction of the run, in [0, 1]; the other units count whole epochs, batches, samples, tokens,
    iterations or seconds.
    """
    match = _TIME_STRING.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    number, unit = match.groups()
    if (unit == "dur" and float(number) > 1) or (unit != "dur" and "." in number):
        return None
    return unit


def _time_value(value: str) -> float:
    return float(_TIME_STRING.match(value).group(1))


def _is_zero_warmup(value: Any) -> bool:
    return value == 0 if is_number(value) else _time_value(value) == 0


@dataclass(frozen=True)
class _Rule:
    """A constraint between parameters of a constructor, checked on the settings with defaults filled in.

    :param keys: The parameters it involves (shown in the problem).
    :param check: True when the settings satisfy it.
    :param message: The problem when they do not.
    """

    keys: Tuple[str, ...]
    check: Callable[[Mapping[str, Any]], bool]
    message: str


@dataclass(frozen=True)
class _Spec:
    """A Composer algorithm as a recipe may use it.

    :param domains: The model domains it is made for.
    :param params: Its settable constructor parameters.
    :param rules: Constraints between parameters.
    """

    domains: frozenset
    params: Mapping[str, _Param] = field(default_factory=dict)
    rules: Tuple[_Rule, ...] = ()


def _fraction(default: float, *, high_open: bool = False) -> _Param:
    return _Param("number", default, low=0, high=1, high_open=high_open)


def _positive(default: Any) -> _Param:
    return _Param("number", default, low=0, low_open=True)


def _count(default: Any, low: int = 1) -> _Param:
    return _Param("int", default, low=low)


def _flag(default: bool) -> _Param:
    return _Param("bool", default)


_KEYS = {"input_key": _Param("key", 0), "target_key": _Param("key", 1)}
_AUGMENTATION_SET = _Param("choice", "all", choices=("all", "safe", "original"))

ALGORITHMS: Mapping[str, _Spec] = MappingProxyType(
    {
        # Model/architecture-agnostic.
        "EMA": _Spec(
            _ANY,
            {
                "half_life": _Param("time", "1000ba", units=("ba", "ep"), nullable=True),
                "smoothing": _Param("number", None, low=0, high=1, nullable=True),
                "ema_start": _Param("time", "0.0dur", units=("dur", "ep", "ba", "sp", "tok", "iter")),
                "update_interval": _Param("time", None, units=("ba", "ep"), nullable=True),
            },
            (
                _Rule(
                    ("half_life", "smoothing"),
                    lambda s: (s["half_life"] is None) != (s["smoothing"] is None),
                    "set exactly one of half_life and smoothing (set half_life to null to use smoothing)",
                ),
                _Rule(
                    ("half_life", "update_interval"),
                    lambda s: (
                        None in (s["half_life"], s["update_interval"])
                        or _time_unit(s["half_life"]) == _time_unit(s["update_interval"])
                    ),
                    "half_life and update_interval must have the same unit",
                ),
            ),
        ),
        "SWA": _Spec(
            _ANY,
            {
                "swa_start": _Param("time", "0.7dur", units=("dur", "ep")),
                "swa_end": _Param("time", "0.97dur", units=("dur", "ep")),
                "update_interval": _Param("time", "1ep", units=("ba", "ep")),
                "schedule_swa_lr": _flag(False),
                "anneal_strategy": _Param("choice", "linear", choices=("linear", "lin", "cos", "cosine")),
                "anneal_steps": _count(10),
                "swa_lr": _Param("number", None, low=0, low_open=True, nullable=True),
            },
            (
                _Rule(
                    ("swa_start", "swa_end"),
                    lambda s: (
                        _time_unit(s["swa_start"]) == _time_unit(s["swa_end"])
                        and _time_value(s["swa_start"]) < _time_value(s["swa_end"])
                    ),
                    "swa_start must come before swa_end, in the same unit",
                ),
            ),
        ),
        "SAM": _Spec(_ANY, {"rho": _positive(0.05), "epsilon": _positive(1.0e-12), "interval": _count(1)}),
        "GradientClipping": _Spec(
            _ANY,
            {
                "clipping_type": _Param("choice", choices=("adaptive", "norm", "value")),
                "clipping_threshold": _Param("number", low=0, low_open=True),
            },
        ),
        "LayerFreezing": _Spec(_ANY, {"freeze_start": _fraction(0.5), "freeze_level": _fraction(1.0)}),
        "LabelSmoothing": _Spec(_ANY, {"smoothing": _fraction(0.1, high_open=True), "target_key": _KEYS["target_key"]}),
        "SelectiveBackprop": _Spec(
            _ANY,
            {
                "start": _fraction(0.5),
                "end": _fraction(0.9),
                "keep": _Param("number", 0.5, low=0, high=1, low_open=True),
                "scale_factor": _Param("number", 1.0, low=0, high=1, low_open=True),
                "interrupt": _count(2, low=0),
                **_KEYS,
            },
            (_Rule(("start", "end"), lambda s: s["start"] < s["end"], "start must be smaller than end"),),
        ),
        # Image data: batch or dataset transforms.
        "CutMix": _Spec(
            _IMAGE,
            {"alpha": _positive(1.0), "interpolate_loss": _flag(False), "uniform_sampling": _flag(False), **_KEYS},
        ),
        "MixUp": _Spec(_IMAGE, {"alpha": _positive(0.2), "interpolate_loss": _flag(False), **_KEYS}),
        "CutOut": _Spec(
            _IMAGE,
            {
                "num_holes": _count(1),
                "length": _Param("number", 0.5, low=0, high=1, low_open=True, high_open=True),
                "uniform_sampling": _flag(False),
                "input_key": _KEYS["input_key"],
            },
        ),
        "ColOut": _Spec(
            _IMAGE,
            {
                "p_row": _fraction(0.15),
                "p_col": _fraction(0.15),
                "batch": _flag(True),
                "resize_target": _Param("bool_or_auto", "auto"),
                **_KEYS,
            },
            (
                _Rule(
                    ("resize_target", "batch"),
                    lambda s: not (s["resize_target"] is True and s["batch"] is False),
                    "resize_target=true needs batch=true",
                ),
            ),
        ),
        "AugMix": _Spec(
            _IMAGE,
            {
                "severity": _Param("int", 3, low=0, high=10),
                "depth": _count(-1, low=-1),
                "width": _count(3),
                "alpha": _positive(1.0),
                "augmentation_set": _AUGMENTATION_SET,
            },
        ),
        "RandAugment": _Spec(
            _IMAGE,
            {
                "severity": _Param("int", 9, low=0, high=10),
                "depth": _count(2, low=0),
                "augmentation_set": _AUGMENTATION_SET,
            },
        ),
        "ProgressiveResizing": _Spec(
            _IMAGE,
            {
                "mode": _Param("choice", "resize", choices=("crop", "resize")),
                "initial_scale": _Param("number", 0.5, low=0, high=1, low_open=True),
                "finetune_fraction": _fraction(0.2),
                "delay_fraction": _fraction(0.5),
                "size_increment": _count(4),
                "resize_targets": _flag(False),
                **_KEYS,
            },
            (
                _Rule(
                    ("delay_fraction", "finetune_fraction"),
                    lambda s: s["delay_fraction"] + s["finetune_fraction"] <= 1,
                    "delay_fraction + finetune_fraction must be <= 1",
                ),
            ),
        ),
        # Model surgery for convolutional networks.
        "BlurPool": _Spec(
            _IMAGE,
            {
                "replace_convs": _flag(True),
                "replace_maxpools": _flag(True),
                "blur_first": _flag(True),
                "min_channels": _count(16, low=0),
            },
            (
                _Rule(
                    ("replace_convs", "replace_maxpools"),
                    lambda s: s["replace_convs"] or s["replace_maxpools"],
                    "replace_convs or replace_maxpools must be true",
                ),
            ),
        ),
        "ChannelsLast": _Spec(_IMAGE),
        "SqueezeExcite": _Spec(_IMAGE, {"latent_channels": _positive(64), "min_channels": _count(128, low=0)}),
        "StochasticDepth": _Spec(
            _IMAGE,
            {
                "target_layer_name": _Param("choice", choices=("ResNetBottleneck",)),
                "stochastic_method": _Param("choice", "block", choices=("block", "sample")),
                "drop_rate": _fraction(0.2),
                "drop_distribution": _Param("choice", "linear", choices=("uniform", "linear")),
                "drop_warmup": _Param("fraction_or_time", 0.0),
            },
            (
                _Rule(
                    ("stochastic_method", "drop_warmup"),
                    lambda s: s["stochastic_method"] == "block" or _is_zero_warmup(s["drop_warmup"]),
                    "drop_warmup must be 0 with stochastic_method='sample'",
                ),
            ),
        ),
        "GhostBatchNorm": _Spec(_IMAGE, {"ghost_batch_size": _count(32)}),
        "WeightStandardization": _Spec(_IMAGE, {"n_last_layers_ignore": _count(0, low=0)}),
        "GyroDropout": _Spec(
            _IMAGE,
            {"p": _fraction(0.5, high_open=True), "sigma": _count(256), "tau": _count(16)},
            (
                _Rule(
                    ("tau", "sigma"),
                    lambda s: s["tau"] <= s["sigma"],
                    "tau (concurrent subnetworks) must be <= sigma (all subnetworks)",
                ),
            ),
        ),
        "Factorize": _Spec(
            _ANY,
            {
                "factorize_convs": _flag(True),
                "factorize_linears": _flag(True),
                "min_channels": _count(256),
                "latent_channels": _positive(0.25),
                "min_features": _count(256),
                "latent_features": _positive(128),
            },
        ),
        # Transformer language models.
        "Alibi": _Spec(
            _TEXT,
            {
                "max_sequence_length": _count(_REQUIRED),
                "train_sequence_length_scaling": _Param("number", 0.25, low=0, high=1, low_open=True),
            },
        ),
        "SeqLengthWarmup": _Spec(
            _TEXT,
            {
                "duration": _fraction(0.3),
                "min_seq_length": _count(8),
                "max_seq_length": _count(1024),
                "step_size": _count(8),
                "truncate": _flag(True),
                "preserve_end_of_sequence": _flag(False),
            },
            (
                _Rule(
                    ("min_seq_length", "max_seq_length"),
                    lambda s: s["min_seq_length"] <= s["max_seq_length"],
                    "min_seq_length must be <= max_seq_length",
                ),
            ),
        ),
        "GatedLinearUnits": _Spec(_TEXT, {"gated_layer_bias": _flag(False), "non_gated_layer_bias": _flag(False)}),
        "LowPrecisionLayerNorm": _Spec(_TEXT),
        "LowPrecisionGroupNorm": _Spec(_TEXT),
    }
)
"""Composer 0.32.1's algorithms by class name: domains, settable parameters (with Composer's defaults) and rules."""


def allowed_algorithms(domain: str) -> Tuple[str, ...]:
    """The algorithm names (sorted) a recipe for a ``domain`` model may use."""
    return tuple(sorted(name for name, spec in ALGORITHMS.items() if domain in spec.domains))


def check_algorithm(problems: Problems, where: str, name: str, kwargs: Mapping[str, Any], domain: str) -> None:
    """Add to ``problems`` (at ``where``) what is wrong with the algorithm ``name`` and its constructor keyword
    arguments ``kwargs`` in a recipe for a ``domain`` model: an unknown name, a domain it is not made for, an unknown
    parameter, a value of the wrong type or out of range, a missing required parameter, contradicting parameters."""
    spec = ALGORITHMS.get(name)
    if spec is None:
        hint = [n for n in ALGORITHMS if n.lower() == str(name).lower()]
        problems.add(
            f"{where}.name",
            name,
            f"not an algorithm of Composer {COMPOSER_VERSION}"
            + (f" (names are case-sensitive: {hint[0]!r})" if hint else "")
            + "; allowed: "
            + ", ".join(sorted(ALGORITHMS)),
        )
        return
    if domain in DOMAINS and domain not in spec.domains:
        made_for = " and ".join(sorted(spec.domains))
        problems.add(
            f"{where}.name",
            name,
            f"made for {made_for} models, not {domain} models; allowed for {domain}: "
            + ", ".join(allowed_algorithms(domain)),
        )
    _check_kwargs(problems, name, spec, kwargs)


def _check_kwargs(problems: Problems, name: str, spec: _Spec, kwargs: Mapping[str, Any]) -> None:
    allowed = ", ".join(sorted(spec.params)) if spec.params else "none (it takes no parameters)"
    settings: Dict[str, Any] = {}
    valid = True
    for key, value in kwargs.items():
        param = spec.params.get(key)
        if param is None:
            problems.add(f"{name}.{key}", value, f"not a parameter of {name}; allowed: {allowed}")
            valid = False
        elif not param.accepts(value):
            problems.add(f"{name}.{key}", value, param.describe())
            valid = False
        else:
            settings[key] = value
    for key, param in spec.params.items():
        if key not in kwargs and param.default is _REQUIRED:
            problems.add(f"{name}.{key}", None, f"missing; {param.describe()}")
            valid = False
        settings.setdefault(key, param.default)
    if valid:
        for rule in spec.rules:
            if not rule.check(settings):
                problems.add(name, {k: settings[k] for k in rule.keys}, rule.message)
