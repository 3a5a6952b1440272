"""Synth-time validation: collect every problem of a construct, then raise once.

Principle 1 of the design: an inconsistent topology is one clear error that names the setting, the value and
what is allowed. Constructs create a :class:`Problems` collector, record each problem with :meth:`Problems.add`
and call :meth:`Problems.raise_if_any` at the end of their checks.
"""

from __future__ import annotations

import math
import re
from enum import Enum
from inspect import getattr_static
from typing import Any, List, Mapping, Optional, Sequence, Type, TypeVar

from aws_cdk import Token
from jsii._reference_map import InterfaceDynamicProxy


class ConfigurationError(ValueError):
    """Raised at synth time when settings are inconsistent. Its message lists every problem found."""

    def __init__(self, where: str, problems: List[str]) -> None:
        self.where = where
        self.problems = list(problems)
        noun = "problem" if len(problems) == 1 else "problems"
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"{where}: {len(problems)} configuration {noun}:\n{lines}")


class Problems:
    """Collects configuration problems so that one error reports all of them.

    :param where: What is being checked, usually the construct path; it starts the error message.
    :param setting_names: How to name each setting in messages, when the user set it under another name (the
        default app maps ``node_count`` to its context key ``nodeCount``). Default: the setting's own name.
    """

    def __init__(self, where: str, *, setting_names: Optional[Mapping[str, str]] = None) -> None:
        self.where = where
        self.setting_names: Mapping[str, str] = dict(setting_names or {})
        self._problems: List[str] = []

    def add(self, setting: str, value: Any, allowed: str) -> None:
        """Record that ``setting`` has ``value``, with ``allowed`` telling what would be accepted."""
        self._problems.append(f"{self.setting_names.get(setting, setting)}={value!r}: {allowed}")

    def renamed(self, names: Mapping[str, str]) -> "Problems":
        """A view that records into this collector and names setting ``s`` as this collector names ``names[s]``: for
        checks written for a construct's props (``instance_type``) run on a stack's (``cpu_instance_type``)."""
        view = Problems(
            self.where, setting_names={own: self.setting_names.get(name, name) for own, name in names.items()}
        )
        view._problems = self._problems
        return view

    def __bool__(self) -> bool:
        return bool(self._problems)

    def __iter__(self):
        return iter(self._problems)

    def raise_if_any(self) -> None:
        """Raise :class:`ConfigurationError` with every recorded problem, if there is one."""
        if self._problems:
            raise ConfigurationError(self.where, self._problems)


def is_concrete(value: Any) -> bool:
    """True when ``value`` is known at synth time (not None, not a CloudFormation token), so it can be checked.

    Only strings and numbers can be tokens; any other value is concrete (and left for the type checks)."""
    if value is None:
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return True  # never a token, and jsii cannot carry NaN or infinity to check it
    return not (isinstance(value, (str, int, float)) and not isinstance(value, bool) and Token.is_unresolved(value))


# --- Checks of single values, shared by every construct and chart ------------------------------------------------
# Each records a problem (and returns False) when the value is not acceptable, so that a construct can check all of
# its props, then raise once. None of them raises on a value of the wrong type.

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
"""A Kubernetes object name of the DNS-1123 label form (namespaces, services, most names), at most 63 characters."""

DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
"""A Kubernetes object name of the DNS-1123 subdomain form (ConfigMaps, roles, claims...), at most 253 characters."""

_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def is_integer(value: Any) -> bool:
    """True for an ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_integer(
    problems: Problems, setting: str, value: Any, *, minimum: Optional[int] = None, maximum: Optional[int] = None
) -> bool:
    """``value`` is an integer in ``[minimum, maximum]``."""
    if is_integer(value) and (minimum is None or value >= minimum) and (maximum is None or value <= maximum):
        return True
    bounds = (
        f"from {minimum} to {maximum}"
        if minimum is not None and maximum is not None
        else f"of at least {minimum}"
        if minimum is not None
        else f"of at most {maximum}"
        if maximum is not None
        else ""
    )
    problems.add(setting, value, f"an integer {bounds}".rstrip() + whole_number_hint(value))
    return False


def check_number(problems: Problems, setting: str, value: Any, *, minimum: float, below: float) -> bool:
    """``value`` is a number (int or float, not bool) with ``minimum <= value < below``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and minimum <= value < below:
        return True
    problems.add(setting, value, f"a number at least {minimum} and below {below}")
    return False


def check_bool(problems: Problems, setting: str, value: Any) -> bool:
    """``value`` is ``True`` or ``False``."""
    if isinstance(value, bool):
        return True
    word = value.strip().lower() if isinstance(value, str) else None
    hint = f" (did you mean {word == 'true'}?)" if word in ("true", "false") else ""
    problems.add(setting, value, f"true or false{hint}")
    return False


def check_text(problems: Problems, setting: str, value: Any, *, allowed: str = "a non-empty string") -> bool:
    """``value`` is a non-empty string without leading or trailing whitespace (tokens pass)."""
    if isinstance(value, str) and value and (Token.is_unresolved(value) or value == value.strip()):
        return True
    problems.add(setting, value, allowed)
    return False


IMAGE_REFERENCE_HELP = (
    "a container image reference such as registry/repository:tag, optionally pinned by digest as "
    "registry/repository:tag@sha256:<64 lowercase hex digits>"
)

_IMAGE_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def check_image_reference(problems: Problems, setting: str, value: Any) -> bool:
    """``value`` is an image reference: a string without whitespace whose digest, when it has one (after ``@``), is
    ``sha256:`` and 64 lowercase hex digits (OCI image spec, "Digests"). Tokens pass."""
    if not check_text(problems, setting, value, allowed=IMAGE_REFERENCE_HELP):
        return False
    if Token.is_unresolved(value):
        return True
    name, at, digest = value.partition("@")
    if not name or any(c.isspace() for c in value) or (at and not _IMAGE_DIGEST.fullmatch(digest)):
        problems.add(setting, value, IMAGE_REFERENCE_HELP)
        return False
    return True


def check_pattern(problems: Problems, setting: str, value: Any, pattern: re.Pattern, allowed: str) -> bool:
    """``value`` is a string matching ``pattern`` as a whole (``fullmatch``: no trailing newline slips through)."""
    if isinstance(value, str) and pattern.fullmatch(value):
        return True
    problems.add(setting, value, allowed)
    return False


def check_dns_label(problems: Problems, setting: str, value: Any, *, max_length: int = 63) -> bool:
    """``value`` is a DNS-1123 label (lowercase letters, digits and '-', starting and ending with an alphanumeric)
    of at most ``max_length`` characters."""
    if isinstance(value, str) and len(value) <= max_length and DNS1123_LABEL.fullmatch(value):
        return True
    problems.add(
        setting,
        value,
        f"a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most "
        f"{max_length} characters",
    )
    return False


def check_dns_subdomain(problems: Problems, setting: str, value: Any) -> bool:
    """``value`` is a DNS-1123 subdomain of at most 253 characters."""
    if isinstance(value, str) and len(value) <= 253 and DNS1123_SUBDOMAIN.fullmatch(value):
        return True
    problems.add(setting, value, "a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', at most 253 characters")
    return False


def check_strings(problems: Problems, setting: str, value: Any, *, allow_empty_items: bool = True) -> bool:
    """``value`` is a sequence of strings (a list or tuple; a plain string is refused: it is not a list of words)."""
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        if allow_empty_items or all(value):
            return True
    problems.add(setting, value, "a list of strings (a single string is not split into words)")
    return False


def check_string_map(problems: Problems, setting: str, value: Any) -> bool:
    """``value`` is a mapping of strings to strings."""
    if isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return True
    problems.add(setting, value, "a mapping of strings to strings")
    return False


def check_absolute_path(problems: Problems, setting: str, value: Any) -> bool:
    """``value`` is an absolute POSIX path below the root, without ``..`` or empty segments."""
    if (
        isinstance(value, str)
        and value.startswith("/")
        and value != "/"
        and all(part not in ("", ".", "..") for part in value[1:].split("/"))
        and value == value.strip()
    ):
        return True
    problems.add(setting, value, "an absolute path below the root, such as /data (no '..', no trailing '/')")
    return False


def check_key_prefix(problems: Problems, setting: str, value: Any, *, empty: bool = True) -> bool:
    """``value`` is an S3 "folder": empty (the whole bucket; only with ``empty``) or a key prefix that ends with '/',
    without a leading '/', surrounding spaces or the wildcards '*' and '?'. The same string is then the prefix of an
    FSx data repository path (``s3://bucket/prefix/``), of an IAM resource (``bucket/prefix/*``) and of an
    ``s3:prefix`` condition, and means the same objects in all three: ``data`` would also grant ``data-old/``."""
    if isinstance(value, str) and (
        (value == "" and empty)
        or (
            value.endswith("/") and not value.startswith("/") and value == value.strip() and not {"*", "?"} & set(value)
        )
    ):
        return True
    allowed = "a key prefix in the bucket that ends with '/' (datasets/), without a leading '/', '*' or '?'"
    problems.add(setting, value, allowed + ("" if empty else ", not empty"))
    return False


def check_label_key(problems: Problems, setting: str, value: Any) -> bool:
    """``value`` is a Kubernetes label or taint key: an optional DNS-subdomain prefix and '/', then a name of at
    most 63 characters (alphanumerics, '-', '_', '.', starting and ending with an alphanumeric). A '/' needs a
    prefix before it (apimachinery ``IsQualifiedName``: "prefix part must be non-empty")."""
    if isinstance(value, str) and value:
        prefix, slash, name = value.rpartition("/")
        prefix_ok = not slash or (0 < len(prefix) <= 253 and DNS1123_SUBDOMAIN.fullmatch(prefix) is not None)
        if prefix_ok and len(name) <= 63 and _QUALIFIED_NAME.fullmatch(name):
            return True
    problems.add(
        setting, value, "a Kubernetes label key: [prefix/]name, name of at most 63 alphanumerics, '-', '_', '.'"
    )
    return False


def check_label_value(problems: Problems, setting: str, value: Any) -> bool:
    """``value`` is a Kubernetes label value: empty, or at most 63 alphanumerics, '-', '_', '.' starting and ending
    with an alphanumeric."""
    if isinstance(value, str) and len(value) <= 63 and _LABEL_VALUE.fullmatch(value):
        return True
    problems.add(setting, value, "a Kubernetes label value: at most 63 alphanumerics, '-', '_', '.'")
    return False


def check_labels(problems: Problems, setting: str, value: Any) -> bool:
    """``value`` maps label keys to label values."""
    if not check_string_map(problems, setting, value):
        return False
    return all(
        [check_label_key(problems, f"{setting} key", key) for key in value]
        + [check_label_value(problems, f"{setting}[{key!r}]", item) for key, item in value.items()]
    )


E = TypeVar("E", bound=Enum)


def coerce_enum(problems: Problems, setting: str, value: Any, enum_type: Type[E]) -> Optional[E]:
    """``value`` as a member of ``enum_type``: the member itself or its value (``"c10d"`` for
    ``Rendezvous.C10D``); None, with a problem recorded, for anything else."""
    if isinstance(value, enum_type):
        return value
    for member in enum_type:
        if value == member.value:
            return member
    values = [member.value for member in enum_type if isinstance(member.value, str)]
    allowed = ", ".join(repr(member.value) for member in enum_type)
    problems.add(setting, value, f"one of {allowed} (or the {enum_type.__name__} member){nearest(value, values)}")
    return None


def check_instance(problems: Problems, setting: str, value: Any, expected: Any, allowed: str) -> bool:
    """``value`` is an instance of ``expected`` (a class or a tuple of classes)."""
    if isinstance(value, expected):
        return True
    problems.add(setting, value, allowed)
    return False


def check_optional_settings(problems: Problems, setting: str, value: Any, kind: type, allowed: str) -> bool:
    """``value`` is None or a ``kind`` (a settings class with ``check(problems, setting)``) whose own check passes."""
    if value is None:
        return True
    if not check_instance(problems, setting, value, kind, allowed):
        return False
    return bool(value.check(problems, setting))


def implements(value: Any, interface: type) -> bool:
    """Whether ``value`` is a CDK object of the jsii ``interface`` (``ec2.IVpc``, ``eks.ICluster``...).

    ``isinstance`` cannot check jsii interfaces (they are protocols) and reading an attribute may call into jsii and
    fail, so this reads the classes behind ``value``: the interfaces a jsii class declares (``__jsii_ifaces__``, with
    the interfaces they extend), or the interface proxy classes jsii builds for objects returned by ``from_*``.
    """
    delegates = getattr_static(value, "_delegates", None) if isinstance(value, InterfaceDynamicProxy) else None
    proxy_class = getattr(interface, "__jsii_proxy_class__", None)
    proxy = proxy_class() if callable(proxy_class) else None
    for candidate in [type(d) for d in delegates] if delegates else [type(value)]:
        if proxy is not None and issubclass(candidate, proxy):
            return True
        declared = [i for klass in candidate.__mro__ for i in getattr_static(klass, "__jsii_ifaces__", None) or ()]
        if any(interface in i.__mro__ for i in declared):
            return True
    return False


def check_implements(problems: Problems, setting: str, value: Any, interface: type, allowed: str) -> bool:
    """``value`` implements the jsii ``interface``."""
    if implements(value, interface):
        return True
    problems.add(setting, value, allowed)
    return False


_BUCKET_CHARACTERS = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IP_ADDRESS_FORM = re.compile(r"\d{1,3}(\.\d{1,3}){3}")
_RESERVED_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def bucket_name_problem(name: Any) -> Optional[str]:
    """Why ``name`` is not a valid general purpose S3 bucket name, or None when it is.

    Rules of the Amazon S3 user guide, "General purpose bucket naming rules": 3 to 63 characters; lowercase letters,
    digits, dots and hyphens; a letter or digit first and last; no two adjacent dots; not an IP address; not the
    reserved prefixes ``xn--``, ``sthree-``, ``amzn-s3-demo-`` nor the suffixes ``-s3alias``, ``--ol-s3``, ``.mrap``,
    ``--x-s3``, ``--table-s3``.
    """
    if not isinstance(name, str):
        return "a bucket name (a string)"
    if not _BUCKET_CHARACTERS.fullmatch(name):
        return "3-63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit"
    if ".." in name:
        return "no two adjacent dots"
    if _IP_ADDRESS_FORM.fullmatch(name):
        return "not formatted as an IP address"
    reserved = [p for p in _RESERVED_BUCKET_PREFIXES if name.startswith(p)]
    reserved += [s for s in _RESERVED_BUCKET_SUFFIXES if name.endswith(s)]
    if reserved:
        return f"S3 reserves {reserved[0]!r} for other bucket kinds"
    return None


_SEPARATORS = re.compile(r"[\s_-]+")


def nearest(value: Any, choices: Sequence[str], *, cutoff: float = 0.8) -> str:
    """`` (did you mean 'x'?)`` for the choice ``value`` most likely means: the same text but for case, surrounding
    spaces and separators (``' '``, ``'_'``, ``'-'``: ``node_group`` for ``node-group``, ``instance_type`` for
    ``instanceType``), a number whose text is a choice (``1.36`` for ``'1.36'``), else the closest by
    :func:`difflib.get_close_matches` (``cutoff``); empty when none is near."""
    import difflib

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f" (did you mean {str(value)!r}?)" if str(value) in choices else ""
    if not isinstance(value, str):
        return ""
    folded = {choice.lower(): choice for choice in choices}
    unseparated = {_SEPARATORS.sub("", choice.lower()): choice for choice in choices}
    text = value.strip().lower()
    found = folded.get(text) or unseparated.get(_SEPARATORS.sub("", text))
    if found is None:
        close = difflib.get_close_matches(text, list(folded), n=1, cutoff=cutoff)
        found = folded[close[0]] if close else None
    return f" (did you mean {found!r}?)" if found is not None and found != value else ""


def whole_number_hint(value: Any) -> str:
    """`` (did you mean 4?)`` when ``value`` is the text of a whole number (``"4"``, ``" 4 "``, ``"4.0"``) or a whole
    float (``4.0``) where an integer goes; empty otherwise."""
    if isinstance(value, bool) or not isinstance(value, (str, float)):
        return ""
    try:
        number = float(value)
    except ValueError:
        return ""
    return f" (did you mean {int(number)}?)" if math.isfinite(number) and number.is_integer() else ""


AZ_NAME = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9][a-z]")
"""An Availability Zone's name (``us-west-2a``), which maps to a different zone in each account."""


def az_name_hint(value: Any) -> str:
    """What to do when ``value`` is an AZ name where an AZ ID is wanted: the ID format and the command that lists the
    account's names with their IDs (EC2 user guide, "AZ IDs"); empty otherwise."""
    if not isinstance(value, str) or not AZ_NAME.fullmatch(value):
        return ""
    region = value[:-1]
    return (
        f"; {value!r} is an AZ name, which maps to a different zone in each account: give its AZ ID (such as "
        f"usw2-az4), listed by `aws ec2 describe-availability-zones --region {region} --query "
        f'"AvailabilityZones[].[ZoneName,ZoneId]" --output text`'
    )


def check_instance_types(problems: Problems, setting: str, value: Any) -> bool:
    """``value`` is None (the default) or a non-empty list of instance types of the catalog."""
    from trainium_eks.facts.catalog import INSTANCE_CATALOG

    if value is None:
        return True
    if check_strings(problems, setting, value) and value:
        unknown = [name for name in value if name not in INSTANCE_CATALOG]
        if not unknown:
            return True
        hints = "".join(nearest(name, list(INSTANCE_CATALOG)) for name in unknown)
        problems.add(setting, unknown, f"instance types of the catalog{hints}: {', '.join(INSTANCE_CATALOG)}")
    elif isinstance(value, (list, tuple)):
        problems.add(setting, value, "at least one instance type")
    return False


def check_image_directory(problems: Problems, setting: str, value: Any) -> bool:
    """``value`` is the path of a directory holding a Dockerfile (built by ``cdk deploy``)."""
    from pathlib import Path

    if isinstance(value, str) and value and (Path(value) / "Dockerfile").is_file():
        return True
    problems.add(setting, value, "the path of a directory with a Dockerfile")
    return False


def check_stack_props(where: str, stack_props: Mapping[str, Any], own_props: Sequence[str] = ()) -> None:
    """Raise ``ConfigurationError`` for keyword arguments that ``Stack`` does not take (instead of its TypeError),
    each with the nearest of ``own_props`` (the stack's own props) and ``Stack``'s."""
    import inspect

    from aws_cdk import Stack

    known = [name for name in inspect.signature(Stack.__init__).parameters if name not in ("self", "scope", "id")]
    problems = Problems(where)
    for name in sorted(set(stack_props) - set(known)):
        hint = nearest(name, [*own_props, *known], cutoff=0.6)
        takes = f"its props are {', '.join(own_props)}; " if own_props else ""
        problems.add(
            name, stack_props[name], f"not a setting of this stack{hint}; {takes}Stack takes {', '.join(known)}"
        )
    problems.raise_if_any()


CLUSTER_ATTRIBUTE_HINTS: Mapping[str, str] = {
    "vpc": "vpc=",
    "cluster_security_group": "cluster_security_group_id=",
    "kubectl_provider": "kubectl_provider=eks.KubectlProvider.from_kubectl_provider_attributes(...)",
}
"""How to give an imported cluster each attribute the constructs need (``eks.Cluster.from_cluster_attributes``)."""


CLUSTER_HINT = (
    "an eks.ICluster: a TrainingCluster's .cluster, or an existing cluster imported with "
    "eks.Cluster.from_cluster_attributes(...)"
)
"""What a construct's ``cluster`` takes, and where to get one."""


def check_cluster(problems: Problems, setting: str, cluster: Any, *attributes: str) -> bool:
    """``cluster`` is an ``eks.ICluster`` that has ``attributes`` (an imported cluster only has those it was given;
    reading another raises inside jsii)."""
    from aws_cdk import aws_eks_v2 as eks

    if not check_implements(problems, setting, cluster, eks.ICluster, CLUSTER_HINT):
        return False
    missing = []
    for attribute in attributes:
        try:
            present = getattr(cluster, attribute) is not None
        except RuntimeError:
            present = False
        if not present:
            missing.append(attribute)
    if missing:
        hints = ", ".join(CLUSTER_ATTRIBUTE_HINTS[name] for name in missing)
        problems.add(
            setting,
            f"<cluster without {', '.join(missing)}>",
            f"a cluster with {', '.join(missing)}: import it with eks.Cluster.from_cluster_attributes(..., {hints})",
        )
    return not missing
