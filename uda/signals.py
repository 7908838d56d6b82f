"""Ctrl-C and SIGTERM as requests to stop after the step under way, for the training loop (which runs
every training of the library: tasks, the QA-shaped start, the MLM stage)."""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator


@contextmanager
def stop_requests(st: Any) -> Iterator[None]:
    """While the loop runs, SIGINT (Ctrl-C) and SIGTERM (a scheduler's stop, ``timeout``, a preempted
    machine) ask it to stop after the step under way, with a checkpoint of that step, instead of
    losing everything since the last save. A second Ctrl-C stops at once. The handlers in place before
    are put back afterwards. Signals reach only the main thread: elsewhere nothing is changed.
    ``st``: any object with an int ``stop_signal`` (0 until a signal comes), which the loop reads."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def request(signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and st.stop_signal == signal.SIGINT:
            raise KeyboardInterrupt  # the second Ctrl-C: no waiting for the step
        if not st.stop_signal:  # said at once: the step under way may take a while
            sys.stderr.write(f"\n{signal.Signals(signum).name}: stopping after the step under way, with a "
                             f"checkpoint of it (Ctrl-C again stops at once, without it)\n")
            sys.stderr.flush()
        st.stop_signal = st.stop_signal or signum

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in before:
        signal.signal(sig, request)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
