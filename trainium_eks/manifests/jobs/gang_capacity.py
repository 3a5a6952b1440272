"""GangCapacity: how a gang's release holds all its nodes, as a job chart's setting."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Dict

from trainium_eks.core.validation import Problems, check_instance, check_integer
from trainium_eks.manifests.jobs.job_release_program import CAPACITY_SETTINGS

MAX_SECONDS = 6 * 3600
"""The longest an attempt, a pause or a stall may be set to: 6 hours."""
MAX_COUNT = 10
"""The most attempts and restarts a gang may be given."""
MAX_QUEUE_SECONDS = 30 * 24 * 3600
"""The longest a gang may be set to wait for its pool's nodes held by other jobs: 30 days."""

_SETTINGS = {
    "timeout_seconds": ("timeout", MAX_SECONDS),
    "attempts": ("attempts", MAX_COUNT),
    "pause_seconds": ("pause", MAX_SECONDS),
    "stall_seconds": ("stall", MAX_SECONDS),
    "restarts": ("restarts", MAX_COUNT),
    "queue_seconds": ("queue", MAX_QUEUE_SECONDS),
}
"""Field -> (the release program's setting, :data:`CAPACITY_SETTINGS`; the field's maximum)."""


@dataclass(frozen=True)
class GangCapacity:
    """How the release of a gang (a job of two pods or more) holds all its nodes before it creates the gang, and
    again when a restart of it stalls (:class:`~trainium_eks.manifests.jobs.job_release_program.Capacity`,
    :class:`~trainium_eks.manifests.jobs.job_release_program.GangWatch`). Give it to a job chart as ``capacity``; the
    chart writes each setting that differs from its default as an annotation of the held job
    (:data:`~trainium_eks.manifests.jobs.job_release_program.CAPACITY_SETTINGS`), which the release reads, and the
    job's name covers it. A job of one pod holds no nodes first and ignores it.

    The release Job's own deadline (``JobSequence(release_timeout=...)``, 14 days by default; the workflow's run
    deadline plus every attempt) ends every wait, whatever these say.

    :param timeout_seconds: How long one attempt may take to hold every node, from 60 s to 6 h. Default: 1800.
    :param attempts: How many attempts before the release fails (and with it every job waiting for the gang), from 1
        to 10. Default: 3.
    :param pause_seconds: The pause between two attempts, from 1 s to 6 h (nodes launched by a failed attempt and
        given back may be reused or consolidated meanwhile). Default: 600.
    :param stall_seconds: How long a pod of a created gang may stay placed but not started (Volcano's
        ``Schedulable``) before the release deletes the gang to hold all its nodes again, from 60 s to 6 h.
        Default: 300.
    :param restarts: How many times the release may do so; the next stall deletes the gang for good and fails the
        release, from 1 to 10. Default: 3.
    :param queue_seconds: How long, in all, the gang may wait for the nodes of its Karpenter NodePool while other jobs
        hold them up to the pool's limit, holding none and without its attempts counting; then such rounds count as
        attempts. From 60 s to 30 days. Default: 86400 (24 hours).
    """

    timeout_seconds: int = CAPACITY_SETTINGS["timeout"][1]
    attempts: int = CAPACITY_SETTINGS["attempts"][1]
    pause_seconds: int = CAPACITY_SETTINGS["pause"][1]
    stall_seconds: int = CAPACITY_SETTINGS["stall"][1]
    restarts: int = CAPACITY_SETTINGS["restarts"][1]
    queue_seconds: int = CAPACITY_SETTINGS["queue"][1]

    def check(self, problems: Problems, setting: str) -> bool:
        """Every field is an integer in its range; each wrong one is a problem named ``<setting>.<field>``."""
        good = True
        for field in fields(self):
            minimum = 60 if field.name in ("timeout_seconds", "stall_seconds", "queue_seconds") else 1
            maximum = _SETTINGS[field.name][1]
            good &= check_integer(
                problems, f"{setting}.{field.name}", getattr(self, field.name), minimum=minimum, maximum=maximum
            )
        return good

    def annotations(self) -> Dict[str, str]:
        """The held job's annotations of the settings that differ from their defaults (none by default, so that a job
        keeps its name)."""
        found = {}
        for field in fields(self):
            annotation, default = CAPACITY_SETTINGS[_SETTINGS[field.name][0]]
            value = getattr(self, field.name)
            if value != default:
                found[annotation] = str(value)
        return found


def check_capacity(problems: Problems, setting: str, value: object) -> bool:
    """``value`` is a :class:`GangCapacity` whose fields are in range."""
    if not check_instance(problems, setting, value, GangCapacity, "a GangCapacity"):
        return False
    return value.check(problems, setting)  # type: ignore[attr-defined]
