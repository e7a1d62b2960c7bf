"""The real browser the page tests drive: Debian's Chromium through Playwright (never `playwright install`).

A test module takes `browser` and `page` from here and sets `pytestmark = BROWSER_MARK`: without Chromium
or Playwright it skips, unless NGRP_REQUIRE_BROWSER=1 (CI), where a missing browser fails instead."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium")
REQUIRED = os.environ.get("NGRP_REQUIRE_BROWSER") == "1"
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - the dev extra installs it
    sync_playwright = None

BROWSER_MARK = pytest.mark.skipif(
    not REQUIRED and (CHROMIUM is None or sync_playwright is None),
    reason="needs Debian chromium (apt-get install chromium) and playwright (dev extra)",
)


@pytest.fixture(scope="module")
def browser():
    assert CHROMIUM and sync_playwright, "chromium and playwright are required here (NGRP_REQUIRE_BROWSER=1)"
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    """A fresh tab that records page errors and dialogs (a dialog is a script that ran) in `tab.errors`."""
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    tab = context.new_page()
    tab.errors = []
    tab.on("pageerror", lambda exc: tab.errors.append(str(exc)))
    tab.on("dialog", lambda dialog: (tab.errors.append("dialog: " + dialog.message), dialog.dismiss()))
    yield tab
    context.close()
