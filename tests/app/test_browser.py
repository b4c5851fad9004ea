"""JupyterLab itself, in a real browser: start it from the project's environment, open notebook 01 in
headless Chromium (Debian's, driven by Playwright's Python package), run every cell, and check that a
widget and a figure render and that no cell errors. Screenshots go to build/browser/."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from eagle3lab import bundled

NOTEBOOK = "01_config_flags.ipynb"
SHOTS = bundled.ROOT / "build" / "browser"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("the browser test needs Debian's chromium on PATH: `make install` runs scripts/install-system.sh, "
                    "which installs it with apt-get when it can (sudo apt-get install chromium chromium-driver)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on a free local port, serving a copy of the notebooks (the repository's stay untouched)."""
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(bundled.ROOT / "notebooks", root / "notebooks")
    os.symlink(bundled.DATA, root / "data")                        # the notebooks' ../data paths
    settings = root / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    # render every cell (JupyterLab 4 only renders the visible ones by default), no autosave
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    (root / "settings" / "@jupyterlab" / "docmanager-extension").mkdir(parents=True)
    (root / "settings" / "@jupyterlab" / "docmanager-extension" / "plugin.jupyterlab-settings").write_text(
        json.dumps({"autosave": False}))
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(root / "settings"), "MPLBACKEND": ""}
    proc = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
                             f"--IdentityProvider.token={token}", f"--notebook-dir={root / 'notebooks'}",
                             "--ServerApp.disable_check_xsrf=True", *(["--allow-root"] if os.geteuid() == 0 else [])],
                            env=env, stdout=subprocess.DEVNULL, stderr=open(root / "lab.log", "w"))
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail(f"JupyterLab did not start: {(root / 'lab.log').read_text()[-2000:]}")
    yield url, token
    proc.terminate()
    proc.wait(timeout=30)


@pytest.mark.timeout(600)
def test_notebook_runs_in_jupyterlab_with_a_widget_and_a_figure(lab):
    from playwright.sync_api import sync_playwright

    url, token = lab
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            counts = _run_all(page, url, token)
        except Exception:
            page.screenshot(path=str(SHOTS / "01_failed.png"), full_page=True)
            raise
        finally:
            browser.close()
    assert counts["errors"] == 0, counts
    assert counts["images"] >= 1, f"no figure rendered: {counts}"
    assert counts["widgets"] >= 1, f"no widget rendered: {counts}"


def _run_all(page, url, token) -> dict:
    """Open the notebook, run every cell, count what rendered."""
    page.goto(f"{url}/lab/tree/{NOTEBOOK}?token={token}")
    # the whole notebook loaded and its kernel started (the status bar reads "Python 3 (ipykernel) | Idle")
    page.wait_for_function("() => document.querySelectorAll('.jp-Notebook .jp-CodeCell').length >= 10",
                           timeout=90_000)
    page.wait_for_function("() => /\\| Idle/.test(document.querySelector('#jp-main-statusbar')?.innerText || '')",
                           timeout=90_000)
    page.screenshot(path=str(SHOTS / "01_opened.png"))
    page.click("li.lm-MenuBar-item:has-text('Run')")
    page.click("li.lm-Menu-item:has-text('Run All Cells')")
    # every code cell has run when every prompt shows a number (none left at [*] or blank)
    page.wait_for_function(
        """() => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
                   return p.length > 0 && p.every(e => /\\[\\d+\\]/.test(e.textContent)); }""",
        timeout=420_000)
    page.wait_for_timeout(1500)           # let the widget manager and images finish rendering
    page.screenshot(path=str(SHOTS / "01_ran.png"), full_page=True)
    counts = page.evaluate("""() => ({
        cells: document.querySelectorAll('.jp-CodeCell').length,
        images: document.querySelectorAll('.jp-OutputArea-output img').length,
        widgets: document.querySelectorAll('.jp-OutputArea-output .widget-slider, .jp-OutputArea-output .jupyter-widgets').length,
        errors: [...document.querySelectorAll('.jp-OutputArea-output')].filter(
            e => e.innerText.includes('Traceback (most recent call last)')).length})""")
    return counts
