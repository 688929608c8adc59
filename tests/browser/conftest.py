"""Browser fixtures: real JupyterLab / Notebook 7 servers and Debian's Chromium via pytest-playwright.

Each server runs on 127.0.0.1 on a free port with an empty token, in a temporary root directory,
with its own config, settings and workspace folders (autosave off, no news or update checks).
Chromium is ``/usr/bin/chromium`` (apt package ``chromium``; override with GPU_NOTEBOOK_CHROMIUM):
Playwright never downloads a browser here. Without it the tests skip, or fail when
GPU_NOTEBOOK_REQUIRE_BROWSER=1 (set it in CI). Browser tests run after every other test: Playwright's
sync API keeps an event loop running in the main thread for the rest of the session, which
breaks ``asyncio.run`` in any test that would come after it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = Path(os.environ.get("GPU_NOTEBOOK_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
EXTENSION = "gpu-notebook"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "browser: drives Chromium against a real Jupyter server (needs /usr/bin/chromium)",
    )
    # pytest-base-url (pulled in by pytest-playwright) trips a pytest deprecation; not ours.
    config.addinivalue_line(
        "filterwarnings",
        "ignore:Session-scoped fixtures defined as instance methods:pytest.PytestRemovedIn10Warning",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)


# ------------------------------------------------------------------ pytest-playwright settings


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    if not CHROMIUM.exists():
        message = f"no Chromium at {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("GPU_NOTEBOOK_REQUIRE_BROWSER") == "1":
            pytest.fail(message)  # CI: a missing browser must not pass as skipped tests
        pytest.skip(message)
    return {
        **browser_type_launch_args,
        "executable_path": str(CHROMIUM),
        "args": CHROMIUM_ARGS,
    }


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_context_args, "viewport": {"width": 1280, "height": 1000}}


# ------------------------------------------------------------------------------ the servers


class JupyterServer:
    """One running ``jupyter lab`` or ``jupyter notebook`` server and its folders."""

    def __init__(self, app: Literal["lab", "notebook"], base: Path) -> None:
        self.app = app
        self.root_dir = base / "root"
        self.config_dir = base / "config"
        self.log_path = ARTIFACTS / f"server-{app}.log"
        for folder in (self.root_dir, self.config_dir, ARTIFACTS):
            folder.mkdir(parents=True, exist_ok=True)
        settings = self.config_dir / "lab" / "user-settings" / "@jupyterlab"
        _write_json(
            settings / "docmanager-extension" / "plugin.jupyterlab-settings", {"autosave": False}
        )
        _write_json(
            settings / "apputils-extension" / "notification.jupyterlab-settings",
            {"fetchNews": "false", "checkForUpdates": False},
        )
        # Serve this checkout's build of the labextension (labextension/ -> gpu_notebook/labextension,
        # `jlpm build:prod`), not whichever one an install put in the environment: the first
        # labextensions folder on the Jupyter path wins.
        built = ROOT / "gpu_notebook" / "labextension"
        jupyter_path = os.environ.get("JUPYTER_PATH", "")
        if (built / "package.json").is_file():
            (base / "data" / "labextensions").mkdir(parents=True, exist_ok=True)
            (base / "data" / "labextensions" / EXTENSION).symlink_to(
                built, target_is_directory=True
            )
            jupyter_path = os.pathsep.join(p for p in (str(base / "data"), jupyter_path) if p)
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(self.config_dir),
            "JUPYTERLAB_SETTINGS_DIR": str(self.config_dir / "lab" / "user-settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
            "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
            "PYTHONUNBUFFERED": "1",
            "JUPYTER_PATH": jupyter_path,
        }
        module = "jupyterlab" if app == "lab" else "notebook"
        command = [
            sys.executable,
            "-m",
            module,
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--ServerApp.disable_check_xsrf=True",
            f"--ServerApp.root_dir={self.root_dir}",
            "--LabServerApp.extension_manager=readonly",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--ServerApp.allow_root=True")  # CI containers run as root
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            command, env=env, stdout=self._log, stderr=subprocess.STDOUT, cwd=base
        )
        self._wait_ready(timeout_s=60)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.app} server exited; see {self.log_path}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.base_url}/api/status", timeout=2) as response,
            ):
                if response.status == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"{self.app} server not ready after {timeout_s} s; see {self.log_path}")

    def url(self, name: str, ui: Literal["lab", "notebook"]) -> str:
        if ui == "lab":
            return f"{self.base_url}/lab/tree/{name}?reset"
        return f"{self.base_url}/notebooks/{name}"

    @contextlib.contextmanager
    def extension_disabled(self) -> Iterator[None]:
        """Pages loaded inside this block run without the gpu-notebook labextension.

        JupyterLab reads labconfig/page_config.json at every page load, so no restart is needed.
        """
        path = self.config_dir / "labconfig" / "page_config.json"
        _write_json(path, {"disabledExtensions": {EXTENSION: True}})
        try:
            yield
        finally:
            path.unlink()

    def kernel_of(self, path: str) -> dict[str, Any] | None:
        """The kernel model (id, execution_state...) of the session for notebook ``path``."""
        with urllib.request.urlopen(f"{self.base_url}/api/sessions", timeout=10) as response:
            sessions = json.load(response)
        for session in sessions:
            if session.get("path") == path and session.get("kernel"):
                return dict(session["kernel"])
        return None

    def shutdown_kernels(self) -> None:
        """Stop the kernels the last test started, so they do not slow down the next one."""
        with urllib.request.urlopen(f"{self.base_url}/api/sessions", timeout=10) as response:
            sessions = json.load(response)
        for session in sessions:
            request = urllib.request.Request(
                f"{self.base_url}/api/sessions/{session['id']}", method="DELETE"
            )
            with contextlib.suppress(urllib.error.URLError):
                urllib.request.urlopen(request, timeout=10).close()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self._log.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def _server(
    app: Literal["lab", "notebook"], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JupyterServer]:
    server = JupyterServer(app, tmp_path_factory.mktemp(f"jupyter-{app}"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    yield from _server("lab", tmp_path_factory)


@pytest.fixture(scope="session")
def notebook_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    yield from _server("notebook", tmp_path_factory)
