"""What the plugin runs inside nbval's kernel, silently: it adds no outputs and leaves no
names in the notebook's namespace.

Peak GPU memory is read from the notebook's own kernel. The notebooks reset the
allocator's peak statistics while they measure (`labsupport.timing.peak_memory`), so
``torch.cuda.max_memory_allocated()`` after the last cell would cover only the time since
the last reset. Before the first cell, `KERNEL_SETUP` therefore wraps
``torch.cuda.reset_peak_memory_stats`` so that every reset first folds the peak so far
into a running maximum; after the last cell, `KERNEL_SUMMARY` reads that maximum. It
counts tensors allocated through PyTorch (``max_memory_allocated``; the allocator's
reserved peak is reported beside it), not the CUDA context or other libraries. Without
CUDA it is "not measured".
"""
from __future__ import annotations

import ast
import time
from queue import Empty

QUERY_TIMEOUT = 120                     # seconds for the kernel to answer a query

# Runs in the kernel before the first cell, in its own globals (exec(..., {})).
KERNEL_SETUP = r'''
import torch
if torch.cuda.is_available():
    import torch.cuda.memory as memory
    from torch.cuda._utils import _get_device_index
    original, folded = memory.reset_peak_memory_stats, {}

    def reset_peak_memory_stats(device=None):
        """Fold the peak so far into nbval_report's running maximum, then reset."""
        i = _get_device_index(device, optional=True)
        allocated, reserved = folded.get(i, (0, 0))
        folded[i] = (max(allocated, torch.cuda.max_memory_allocated(i)),
                     max(reserved, torch.cuda.max_memory_reserved(i)))
        return original(device)

    reset_peak_memory_stats.__wrapped__ = original
    memory.reset_peak_memory_stats = torch.cuda.reset_peak_memory_stats = reset_peak_memory_stats
    memory._nbval_report_folded = folded
'''

# Runs in the kernel after the last cell; leaves its answer, JSON, in sys._nbval_report.
KERNEL_SUMMARY = r'''
import json, platform, sys
info = dict(python=platform.python_version(), torch=None, cuda=None, device=None,
            profile=None, peak_gpu_allocated=None, peak_gpu_reserved=None, widgets=None)
torch = sys.modules.get("torch")
if torch is not None:
    info.update(torch=torch.__version__, cuda=torch.version.cuda)
    if torch.cuda.is_available():
        i = torch.cuda.current_device()
        allocated, reserved = getattr(torch.cuda.memory, "_nbval_report_folded", {}).get(i, (0, 0))
        info.update(device=torch.cuda.get_device_name(i),
                    peak_gpu_allocated=max(allocated, torch.cuda.max_memory_allocated(i)),
                    peak_gpu_reserved=max(reserved, torch.cuda.max_memory_reserved(i)))
    else:
        info["device"] = f"cpu ({platform.machine()}, {torch.get_num_threads()} threads)"
profile = sys.modules.get("labsupport.profile")
if profile is not None:
    info["profile"] = profile.current().name
widgets = sys.modules.get("ipywidgets")
state = widgets.Widget.get_manager_state() if widgets is not None else {"state": {}}
if state["state"]:
    info["widgets"] = state
sys._nbval_report = json.dumps(info, default=str)
'''
SUMMARY_EXPRESSION = "__import__('sys')._nbval_report"


def run_in_kernel(kernel, code: str, expression: str | None = None, timeout: float = QUERY_TIMEOUT):
    """Execute ``code`` silently in nbval's kernel (in fresh globals); return the
    value of ``expression`` (a string) evaluated afterwards, or None.
    Raises RuntimeError when the kernel reports an error or does not answer in `timeout` s."""
    msg_id = kernel.kc.execute(f"exec({code!r}, {{}})", silent=True, store_history=False,
                               user_expressions={"r": expression} if expression else {},
                               allow_stdin=False, stop_on_error=False)
    deadline = time.monotonic() + timeout
    while True:
        try:
            reply = kernel.kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        except Empty:
            raise RuntimeError(f"the kernel did not answer within {timeout:.0f} s") from None
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    content = reply["content"]
    if content["status"] != "ok":
        raise RuntimeError(f"{content.get('ename')}: {content.get('evalue')}")
    if not expression:
        return None
    value = content["user_expressions"]["r"]
    if value["status"] != "ok":
        raise RuntimeError(f"{value.get('ename')}: {value.get('evalue')}")
    return ast.literal_eval(value["data"]["text/plain"])
