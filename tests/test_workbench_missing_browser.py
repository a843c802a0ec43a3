"""A Workbench whose installation lacks the pinned libraries (what a wheel built from a tree
without vendor/ used to be), in headless Chromium against the real server: the page names the
missing files and what to do instead of staying on "connecting…", and each missing file the
browser asks for is a 404 in its own media type, so Chromium reports a missing file (not a JSON
body refused as a stylesheet or a module)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from _browser import Browser, screenshot, workbench_server
from playwright.sync_api import Response, expect

import bundle_server

MISSING = ("xterm.css", "addon-fit.mjs", "xterm.mjs")
MEDIA = {"css": "text/css", "mjs": "text/javascript"}
NOT_FOUND = "the server responded with a status of 404"


def test_a_page_lacking_its_libraries_names_them_and_what_to_do(
    browser: Browser, tmp_path: Path
) -> None:
    # The real server, run from a copy of its package without vendor/ (its own files kept).
    site = tmp_path / "site"
    shutil.copytree(
        Path(bundle_server.__file__).parent,
        site / "bundle_server",
        ignore=shutil.ignore_patterns("vendor"),
    )
    # First on the path, and no working directory before it (`python -m` would put it first).
    search = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = os.environ | {"PYTHONPATH": os.pathsep.join(search), "PYTHONSAFEPATH": "1"}
    with workbench_server(tmp_path, env=env) as server:
        answers: dict[str, tuple[int, str]] = {}

        def seen(response: Response) -> None:
            if "/assets/" in response.url:
                name = response.url.rsplit("/", 1)[-1]
                answers[name] = (response.status, response.headers["content-type"])

        with browser.page() as (page, problems):
            page.on("response", seen)
            page.goto(server.sign_in_url)  # signs in, then the page
            expect(page.get_by_role("alert")).to_have_text(
                "This page cannot start: the Workbench's files xterm.css, addon-fit.mjs, "
                "xterm.mjs are missing from this installation: reinstall bundle-devkit; in a "
                "source checkout, run make vendor."
            )
            expect(page.locator("#connection")).to_have_text("not started")
            screenshot(page, "workbench-missing-libraries")
            refused = {name: answer for name, answer in answers.items() if answer[0] != 200}
            # The stylesheet is always asked for; the modules as far as the graph got.
            assert "xterm.css" in refused and set(refused) <= set(MISSING), answers
            for name, (status, media) in refused.items():
                assert (status, media) == (404, f"{MEDIA[name.rsplit('.', 1)[1]]}; charset=utf-8")
            # Chromium says "404" for each, and nothing about a refused media type.
            assert [m for m in problems.messages if NOT_FOUND not in m] == [], problems.messages
            assert len(problems.messages) == len(refused), problems.messages
    log = (tmp_path / "server.log").read_text()
    assert (
        "bundle-server: the Workbench's files xterm.css, addon-fit.mjs, xterm.mjs are missing "
        "from this installation: reinstall bundle-devkit; in a source checkout, run `make vendor`"
    ) in log
