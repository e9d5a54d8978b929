"""The tests' browser for the Entra stand-in: `KUBETRAY_BROWSER="python tests/oidc/entra_browse.py"`.

Debian's chromium, driven by playwright, signs in on the stand-in's pages like a person
(any login name) and lets Entra's answer go back as it does in a real browser: a page that
posts a form to kubetray's http://localhost listener (response_mode=form_post) by itself.
The stand-in's certificate is from a test CA chromium does not know: errors are ignored for
its pages only by running a context with ignore_https_errors. One JSON line per run goes to
$KUBETRAY_TEST_BROWSER_LOG; $KUBETRAY_TEST_USER is who signs in.
"""

import os
import sys

from browse import FLAGS, record  # tests/oidc/browse.py: the script's own folder is on sys.path
from playwright.sync_api import sync_playwright


def main() -> int:
    url = sys.argv[-1]
    user = os.environ.get("KUBETRAY_TEST_USER", "alice")
    record(event="opened", url=url)
    posted: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_context(ignore_https_errors=True).new_page()
        page.on(
            "request",
            lambda r: (
                posted.append(r.url)
                if r.method == "POST" and r.url.startswith("http://localhost")
                else None
            ),
        )
        page.goto(url)
        for _ in range(8):
            page.wait_for_load_state()
            if page.title() == "kubetray":  # kubetray's page after the posted answer
                break
            if page.locator("input[name=login]").count():
                page.fill("input[name=login]", user)
                page.fill("input[name=password]", "any")
                page.click("button[type=submit]")
            elif page.locator("button[type=submit]").count():
                page.click("button[type=submit]")
            else:
                page.wait_for_timeout(200)
        record(event="done", final=page.url, title=page.title(), posted=posted)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
