"""A JupyterLab server on a loopback port for the client tests (test_clients, test_explorers)."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, seconds: float = 90) -> None:
    """Return once ``url`` answers 200; a TimeoutError after ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"JupyterLab did not answer at {url} within {seconds:.0f} s")


@contextlib.contextmanager
def jupyterlab_server(root: Path, home: Path, **env):
    """JupyterLab serving ``root``, its settings, workspaces and config under ``home`` (and any
    further environment ``env``), its log in ``home / 'server.log'``; yields its URL."""
    port = free_port()
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
           "JUPYTER_CONFIG_DIR": str(home / "config"), **env}
    with open(home / "server.log", "w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
             "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--IdentityProvider.token=",
             "--ServerApp.password=", f"--ServerApp.root_dir={root}"],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_for(f"http://127.0.0.1:{port}/lab")
            yield f"http://127.0.0.1:{port}"
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
