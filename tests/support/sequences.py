"""A job sequence stand-in for the workloads outside a stack."""

from __future__ import annotations

from typing import Any, List, Tuple


class RecordingSequence:
    """Records what a workload adds (``add(id, chart)``), in order; ``resolve`` leaves values as they are (no stack,
    no tokens)."""

    def __init__(self) -> None:
        self.added: List[Tuple[str, Any]] = []

    def add(self, id_: str, chart: Any) -> None:
        self.added.append((id_, chart))

    @staticmethod
    def resolve(value: Any) -> Any:
        return value
