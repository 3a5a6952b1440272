"""The handler process of :class:`~rehearsal.handler.HandlerWorkspace`: a warm Lambda environment.

``python -m rehearsal.handler_process <fd>`` imports the extracted handler's ``index`` once (as a
Lambda execution environment does on a cold start), then reads one JSON line per invocation from stdin,
``[event file, result file]``, runs ``index.handler(event, None)``, writes the result file and signals the end of
the invocation on file descriptor ``<fd>``. The handler's prints go to stdout (the workspace's handler log).
Only the standard library is imported here, so the process starts fast.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any, Dict


def serve(done_fd: int) -> None:
    """Run every invocation read from stdin; write ``done`` to ``done_fd`` after each."""
    with os.fdopen(done_fd, "w") as done:
        for line in sys.stdin:
            event_file, result_file = json.loads(line)
            with open(event_file) as source:
                event = json.load(source)
            try:
                import index  # the extracted kubectl handler, first on PYTHONPATH

                response = index.handler(event, None)
                result: Dict[str, Any] = {"succeeded": True, "response": response}
            except Exception as error:  # CloudFormation gets FAILED for any exception
                result = {
                    "succeeded": False,
                    "error": f"{type(error).__name__}: {error}",
                    "trace": traceback.format_exc(),
                }
            with open(result_file, "w") as target:
                json.dump(result, target, default=str)
            sys.stdout.flush()
            sys.stderr.flush()
            done.write("done\n")
            done.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
