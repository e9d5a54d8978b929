"""The tests' browser: `KUBETRAY_BROWSER="python tests/oidc/browse.py"`; the URL comes last.

Debian's chromium, driven by playwright, logs in on oidc-provider's pages like a person would
(any login name; the password is ignored by devInteractions) and follows the redirect back to
kubetray's loopback listener. Each run appends one JSON line to $KUBETRAY_TEST_BROWSER_LOG.
$KUBETRAY_TEST_BROWSER_MODE: "login" (default), or "ignore" (a person who never logs in).
"""

import json
import os
import sys
import time

from playwright.sync_api import sync_playwright

FLAGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def record(**fields: object) -> None:
    path = os.environ.get("KUBETRAY_TEST_BROWSER_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"time": time.time(), **fields}) + "\n")


def main() -> int:
    url = sys.argv[-1]
    mode = os.environ.get("KUBETRAY_TEST_BROWSER_MODE", "login")
    user = os.environ.get("KUBETRAY_TEST_USER", "alice")
    record(event="opened", url=url, mode=mode)
    if mode == "ignore":
        return 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_page()
        callbacks: list[str] = []

        def on_request(request) -> None:  # type: ignore[no-untyped-def]
            if "state=" in request.url and "code=" in request.url:
                callbacks.append(request.url)
                record(event="callback")  # the moment the redirect leaves for kubetray

        page.on("request", on_request)
        page.goto(url)
        for _ in range(8):
            page.wait_for_load_state()
            if page.locator("input[name=login]").count():
                page.fill("input[name=login]", user)
                page.fill("input[name=password]", "any")
                page.click("button[type=submit]")
            elif callbacks or page.title() == "kubetray":  # the loopback success page
                break
            elif page.locator("button[type=submit]").count():
                page.click("button[type=submit]")
            else:
                break
        record(
            event="done",
            final=page.url,
            title=page.title(),
            callback=callbacks[-1] if callbacks else None,
        )
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
