"""`paywarden serve` loads its app with the cyclic collector off; the app's factory freezes what
was loaded and turns the collector back on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.processes import server_environ

PROBE = """
import gc
from server.kit.loading import collect_later, loaded

collect_later()
assert not gc.isenabled()
import server.app  # noqa: F401
assert gc.get_freeze_count() == 0
loaded()
assert gc.isenabled()
assert gc.get_freeze_count() > 100_000, gc.get_freeze_count()
print("ok")
"""


def test_the_collector_is_off_while_loading_and_on_after() -> None:
    # In its own process: freezing is for the whole interpreter, not for the test run's.
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_served_app_collects_again(tmp_path: Path) -> None:
    """The factory uvicorn calls in `paywarden serve` turns the collector back on."""
    probe = (
        "import gc, sys\n"
        "gc.disable()\n"
        "from server.app import create_app_from_env\n"
        "create_app_from_env()\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 100_000)\n"
    )
    environ = server_environ(
        database_url=f"sqlite:///{tmp_path}/absent.sqlite", public_url="http://127.0.0.1:1", extra={}
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=environ, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "True True"
