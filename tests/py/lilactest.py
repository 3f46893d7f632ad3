"""Helpers shared by the pytest files that start `lilac serve` processes."""
import os
import pathlib
import signal
import socket
import subprocess
import time

import httpx
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LILAC = os.environ.get("LILAC_BIN", str(ROOT / "build" / "lilac"))


def shared():
    """The project's shared/ folder ($LILAC_SHARED, ../shared beside the repository, /work/shared),
    or skip the test."""
    for c in (os.environ.get("LILAC_SHARED"), ROOT.parent / "shared", "/work/shared"):
        if c and pathlib.Path(c, "fixtures").is_dir():
            return pathlib.Path(c)
    pytest.skip("shared/ fixtures not found")


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(lilac, model_dir, tmp, args, tries=3):
    """Starts `lilac serve -m model_dir --port P args` on a free port P and waits for /health; returns
    (process, port, log file, log path). A port that another process took between free_port() and the
    server's bind ("cannot listen") is retried on a new one, so that race cannot fail a test."""
    for attempt in range(tries):
        port = free_port()
        log_path = tmp / f"serve-{port}.log"
        log = open(log_path, "wb")
        proc = subprocess.Popen([lilac, "serve", "-m", str(model_dir), "--port", str(port), *args],
                                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if proc.poll() is not None:
                log.close()
                text = log_path.read_text()
                if "cannot listen" in text and attempt + 1 < tries:
                    break
                raise RuntimeError("lilac serve exited: " + text)
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    return proc, port, log, log_path
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            proc.kill()
            proc.wait()
            log.close()
            raise RuntimeError("lilac serve did not start")
    raise RuntimeError("lilac serve: no port it could listen on")


class Server:
    """A `lilac serve` process on a free port (start_serve); its output goes to a file so the log can
    be inspected. args are the serve flags after -m and --port."""

    def __init__(self, model_dir, tmp, *args):
        self.proc, self.port, self.log, self.log_path = start_serve(LILAC, model_dir, tmp, list(args))
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Signals the server (SIGTERM: graceful), kills it after `timeout` s; returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def rss_kb(self):
        for line in pathlib.Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0
