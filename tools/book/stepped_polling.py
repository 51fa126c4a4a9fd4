"""nbclient waits for a cell's execute_reply with one poll of the kernel's shell channel as
long as the cell's timeout. After a cell that displays a widget, that poll can sleep through
the reply (jupyter/nbclient#312): the kernel is idle, the client waits, and the execution
stalls for the whole timeout (900 s here) before failing. Polling in one-second steps picks
the reply up within a second. `install()` makes every NotebookClient of this process poll
so: tools/book/execute_notebooks.py calls it, and so does the book build, through the Sphinx
extension below (listed in _config.yml).
"""
from __future__ import annotations

import time
from queue import Empty

from nbclient import NotebookClient

STEP = 1.0                                      # seconds per poll of the shell channel
_start_client = NotebookClient.async_start_new_kernel_client


def in_steps(get_msg):
    """``get_msg(timeout=t)`` as polls of at most `STEP` seconds until ``t`` has passed."""
    async def get_msg_in_steps(timeout: float | None = None, **kwargs):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = STEP if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await get_msg(timeout=min(STEP, left), **kwargs)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
    return get_msg_in_steps


async def _start_client_polling_in_steps(self):
    kc = await _start_client(self)
    kc.shell_channel.get_msg = in_steps(kc.shell_channel.get_msg)
    return kc


def install() -> None:
    """Make every NotebookClient created from now on poll its shell channel in steps."""
    NotebookClient.async_start_new_kernel_client = _start_client_polling_in_steps


def setup(app):
    """Sphinx extension: the book build's notebook executions poll in steps too."""
    install()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
