"""The playground page at / in headless Chromium (Debian's chromium driven by playwright):
type a prompt, press Generate, and the completion streams into the page, chunk by chunk, with
each token's probability and top alternatives listed; it equals the API's own answer."""
import shutil

import pytest


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PROMPT = "Once upon a time"
TOKENS = 48
SERVER_ARGS = ("--threads", 2)  # for conftest's `server`


def test_page_streams_a_completion(server):
    from playwright.sync_api import sync_playwright

    expected = server.complete(prompt=PROMPT, max_tokens=TOKENS, temperature=0, ignore_eos=True,
                               logprobs=5)["choices"][0]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(server.base + "/")
            page.wait_for_function("document.getElementById('model').textContent.includes('context')")

            # Count how often the output changes: a streamed answer arrives in many pieces.
            page.evaluate("""() => {
                window.outputChanges = 0;
                new MutationObserver(() => window.outputChanges++)
                    .observe(document.getElementById('output'), {childList: true, characterData: true, subtree: true});
            }""")
            page.fill("#prompt", PROMPT)
            page.fill("#max_tokens", str(TOKENS))
            page.fill("#temperature", "0")
            page.fill("#seed", "")
            page.click("#generate")
            page.wait_for_function("document.getElementById('status').textContent.startsWith('finished')")

            assert page.inner_text("#status").startswith("finished (length)")
            assert page.eval_on_selector("#output", "e => e.textContent") == expected["text"]
            assert page.evaluate("window.outputChanges") > 3, "the text did not arrive in pieces"
            rows = page.query_selector_all("#tokens .tok")
            assert len(rows) == TOKENS
            first_alternatives = rows[0].query_selector_all(".alts span")
            assert len(first_alternatives) == 5
            assert all(a.inner_text().endswith("%") for a in first_alternatives)
            assert rows[0].query_selector(".alts span.chosen") is not None  # greedy: the top one
            assert not errors, errors

            # A bad setting shows the server's error message instead of text.
            page.fill("#temperature", "9")
            page.click("#generate")
            page.wait_for_function("document.getElementById('status').textContent.startsWith('error')")
            assert "temperature" in page.inner_text("#status")
        finally:
            browser.close()
