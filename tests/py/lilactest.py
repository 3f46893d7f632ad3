"""Helpers shared by the pytest files that start `lilac serve` processes."""
import os
import pathlib
import socket

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


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
