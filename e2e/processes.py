"""Processes the harness starts: each logs to a file of its own, is stopped by its id, and every wait is bounded."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence


class HarnessError(RuntimeError):
    """Something the harness started did not come up, or ended while it was needed."""


@dataclass
class Started:
    """One process: its name, its command line, the file it logs to and the Popen that runs it.

    :param daemon: Whether the process must stay up for as long as the group (a control-plane server); a process
        that is not a daemon may end on its own (a component the runner restarts, a Job's program).
    """

    name: str
    argv: List[str]
    log: Path
    popen: subprocess.Popen
    daemon: bool = True

    def tail(self, characters: int = 3000) -> str:
        """The end of its log."""
        try:
            return self.log.read_text(errors="replace")[-characters:]
        except OSError:
            return ""


@dataclass
class ProcessGroup:
    """The processes of one test cluster, logging under ``log_dir``; :meth:`stop` stops every one by its id.

    :param log_dir: Where each process's log goes (``<name>.log``).
    """

    log_dir: Path
    started: Dict[str, Started] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[Path] = None,
        daemon: bool = True,
    ) -> Started:
        """Start ``argv`` as ``name`` (a name already running is an error), in a session of its own so that its
        children are stopped with it."""
        with self._lock:
            return self._start(name, argv, env, cwd, daemon)

    def _start(
        self, name: str, argv: Sequence[str], env: Optional[Mapping[str, str]], cwd: Optional[Path], daemon: bool
    ) -> Started:
        if name in self.started and self.started[name].popen.poll() is None:
            raise HarnessError(f"{name} is already running")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{name}.log"
        with open(log, "ab") as out:
            popen = subprocess.Popen(
                list(argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
            )
        self.started[name] = Started(name, list(argv), log, popen, daemon)
        return self.started[name]

    def check(self) -> None:
        """Raise if a daemon has ended."""
        with self._lock:
            processes = list(self.started.values())
        for process in processes:
            code = process.popen.poll()
            if process.daemon and code is not None:
                raise HarnessError(f"{process.name} ended with exit code {code}:\n{process.tail()}")

    def stop_one(self, name: str, timeout: float = 10.0) -> None:
        """Stop ``name`` and its children: SIGTERM to its process group, SIGKILL after ``timeout`` seconds."""
        with self._lock:
            process = self.started.pop(name, None)
        if process is None:
            return
        _stop(process.popen, timeout)

    def stop(self) -> None:
        """Stop every process, the last started first."""
        with self._lock:
            names = list(self.started)
        for name in reversed(names):
            self.stop_one(name)


def _stop(popen: subprocess.Popen, timeout: float) -> None:
    if popen.poll() is None:
        try:
            os.killpg(popen.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            popen.wait(timeout=timeout)
    else:
        # Its children, if any outlived it.
        try:
            os.killpg(popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def wait_for(
    what: str,
    condition: Callable[[], object],
    *,
    timeout: float,
    interval: float = 0.5,
    check: Optional[Callable[[], None]] = None,
    describe: Optional[Callable[[], str]] = None,
) -> object:
    """Call ``condition`` until it returns something true (returned) or ``timeout`` seconds pass (HarnessError naming
    ``what``, with ``describe()`` appended); ``check`` runs before each try (a daemon that died raises at once)."""
    deadline = time.monotonic() + timeout
    last_error: Optional[BaseException] = None
    while True:
        if check is not None:
            check()
        try:
            value = condition()
            if value:
                return value
        except HarnessError:
            raise
        except Exception as error:  # noqa: BLE001 - a server not up yet answers with any kind of error
            last_error = error
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            extra = f"\n{describe()}" if describe is not None else ""
            raise HarnessError(f"timed out after {timeout:.0f} s waiting for {what}{detail}{extra}")
        time.sleep(interval)
