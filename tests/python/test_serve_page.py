"""The playground page at / in headless Chromium (Debian's chromium driven by playwright):
type a prompt, press Generate, and the completion streams into the page, chunk by chunk, with
each token's probability and top alternatives listed; it equals the API's own answer."""
import contextlib
import shutil

import pytest

from test_serve_support import Server


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PROMPT = "Once upon a time"
TOKENS = 48
SERVER_ARGS = ("--threads", 2)  # for conftest's `server`


@contextlib.contextmanager
def browser_page(server):
    """(page, list of the page's script errors) at the server's /, in headless Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(server.base + "/")
            yield page, errors
        finally:
            browser.close()


def test_page_streams_a_completion(server):
    expected = server.complete(prompt=PROMPT, max_tokens=TOKENS, temperature=0, ignore_eos=True,
                               logprobs=5)["choices"][0]
    with browser_page(server) as (page, errors):
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


def test_page_sends_the_api_key_typed_in(serve_model_dir, tmp_path):
    with Server(serve_model_dir, "--api-key", "sk-page", log_dir=tmp_path) as server, \
            browser_page(server) as (page, errors):
        page.fill("#prompt", PROMPT)
        page.fill("#max_tokens", "4")
        page.click("#generate")  # no key yet: the server's 401 shows
        page.wait_for_function("document.getElementById('status').textContent.startsWith('error')")
        assert "error 401" in page.inner_text("#status") and "API key" in page.inner_text("#status")
        page.fill("#api_key", "sk-page")
        page.click("#generate")
        page.wait_for_function("document.getElementById('status').textContent.startsWith('finished')")
        assert page.eval_on_selector("#output", "e => e.textContent")
        assert not errors, errors
