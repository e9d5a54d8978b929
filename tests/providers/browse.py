"""A person at a real provider's pages: `KUBETRAY_BROWSER="python tests/providers/browse.py"`.

Debian's chromium, driven by playwright, does what a person would on the provider's own
pages: fill the login form (Django's `username`, LemonLDAP::NG's `user`), approve the consent
page, confirm a device code, and follow the redirect back to kubetray's loopback listener.
Each run appends JSON lines to $KUBETRAY_TEST_BROWSER_LOG: "opened", then "done" with the last
page's URL, title and the start of its text (a provider's error page shows up there).
$KUBETRAY_TEST_USER / $KUBETRAY_TEST_PASSWORD: the account; $KUBETRAY_TEST_BROWSER_MODE:
"login" (default) or "ignore".
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
USER_FIELDS = ("input[name=username]", "input[name=user]", "input[name=login]")
# Approve buttons, in the order providers show them: DOT's consent and device confirmation,
# LemonLDAP::NG's consent.
APPROVE = (
    "input[name=allow]",
    "button[value=accept]",
    "button#accept",
    "button[type=submit]:has-text('Accept')",
)


def record(**fields: object) -> None:
    path = os.environ.get("KUBETRAY_TEST_BROWSER_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"time": time.time(), **fields}) + "\n")


def main() -> int:
    url = sys.argv[-1]
    mode = os.environ.get("KUBETRAY_TEST_BROWSER_MODE", "login")
    user = os.environ.get("KUBETRAY_TEST_USER", "alice")
    password = os.environ.get("KUBETRAY_TEST_PASSWORD", "")
    record(event="opened", url=url, mode=mode)
    if mode == "ignore":
        return 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_page()
        callbacks: list[str] = []
        steps: list[str] = []

        def on_request(request) -> None:  # type: ignore[no-untyped-def]
            if "state=" in request.url and ("code=" in request.url or "error=" in request.url):
                callbacks.append(request.url)
                record(event="callback")  # the moment the redirect leaves for kubetray

        page.on("request", on_request)
        page.goto(url)
        for _ in range(10):
            page.wait_for_load_state()
            if callbacks or page.title() == "kubetray":  # the loopback's own page
                break
            field = next((f for f in USER_FIELDS if page.locator(f).count()), None)
            if field and page.locator("input[type=password]").count():
                steps.append("login")
                page.fill(field, user)
                page.fill("input[type=password]", password)
                page.locator("input[type=password]").press("Enter")
                continue
            button = next((b for b in APPROVE if page.locator(b).count()), None)
            if button:
                steps.append("approve")
                page.click(button)
                continue
            if page.locator("input[name=user_code]").count() and "user_code=" in page.url:
                steps.append("code")
                page.locator("[type=submit]").first.click()
                continue
            break
        page.wait_for_load_state()
        record(
            event="done",
            final=page.url,
            title=page.title(),
            text=page.locator("body").inner_text()[:400] if page.locator("body").count() else "",
            steps=steps,
            callback=callbacks[-1] if callbacks else None,
        )
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
