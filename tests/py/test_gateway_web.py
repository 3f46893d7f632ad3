"""Browser test of the chat page's privacy dialog: headless Chromium (Debian's) driven by Playwright
(PyPI) against a gateway (`lilac serve --upstream`) whose upstream is a capturing proxy in front of
a second `lilac serve` (see test_gateway.py). A message with an e-mail address and a person's name
(policy: e-mail masked, person ask) brings up the dialog with both spans highlighted; each of the
three buttons is clicked in a fresh conversation and its outcome checked, including what reached
the upstream. Screenshots go to $LILAC_ARTIFACTS (default build/artifacts/playwright/).
"""
import json
import os
import pathlib
import shutil

import pytest

sync_api = pytest.importorskip("playwright.sync_api")
httpx = pytest.importorskip("httpx")

from test_gateway import EMAIL, PERSON, Proxy, Serve, model  # noqa: E402,F401  (model is a fixture)

ROOT = pathlib.Path(__file__).resolve().parents[2]
ART = pathlib.Path(os.environ.get("LILAC_ARTIFACTS", ROOT / "build" / "artifacts")) / "playwright"
POLICY = "default = mask\nsecret = local\nprivate_person = ask\n"


def chromium_path():
    for p in (os.environ.get("LILAC_CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser")):
        if p and pathlib.Path(p).exists():
            return p
    pytest.skip("Debian's chromium is not installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def web(model, tmp_path_factory):  # noqa: F811
    exe = chromium_path()
    tmp = tmp_path_factory.mktemp("gwweb")
    upstream = Serve(model, tmp, "--alias", "cloud-model")
    proxy = Proxy(upstream.url)
    (tmp / "policy").write_text(POLICY)
    gw = Serve(model, tmp, "--upstream", proxy.url + "/v1", "--policy", str(tmp / "policy"))
    ART.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        yield {"gw": gw, "proxy": proxy, "browser": browser}
        browser.close()
    assert gw.stop() == 0
    proxy.close()
    upstream.stop()


def ask(web, name):
    page = web["browser"].new_page()
    page.goto(web["gw"].url + "/")
    page.uncheck("#think")
    page.fill("#input", f"Mein Name ist {PERSON}. Schreib an {EMAIL}")
    page.click("#send")
    page.wait_for_selector(".privacy .choices button")
    marks = page.locator(".privacy mark")
    assert sorted(marks.all_inner_texts()) == sorted([PERSON, EMAIL])
    assert sorted(m.get_attribute("data-label") for m in marks.all()) == ["private_email", "private_person"]
    labels = page.locator(".privacy .choices button").all_inner_texts()
    assert labels == ["Process locally", "Upload anyway", "Skip this step"]
    page.screenshot(path=str(ART / f"{name}-ask.png"))
    return page


def answer(page, name, button):
    page.click(f".privacy .choices button:has-text('{button}')")
    page.wait_for_function("document.querySelector('.msg.assistant[data-done]') !== null", timeout=60000)
    page.screenshot(path=str(ART / f"{name}-after.png"))
    div = page.locator(".msg.assistant").last
    return div.locator(".body").inner_text(), div.get_attribute("data-finish")


def test_process_locally(web):
    n = len(web["proxy"].requests)
    page = ask(web, "local")
    assert len(web["proxy"].requests) == n  # asking sent nothing
    text, finish = answer(page, "local", "Process locally")
    assert text == "Hello world!" and finish == "stop"
    assert len(web["proxy"].requests) == n
    page.close()


def test_upload_anyway(web):
    n = len(web["proxy"].requests)
    page = ask(web, "upload")
    text, finish = answer(page, "upload", "Upload anyway")
    # the proxy echoed the e-mail's placeholder; the page shows the restored value
    assert text == f"Hello {EMAIL}!" and finish == "stop"
    [(_, body)] = web["proxy"].requests[n:]
    sent = json.dumps(json.loads(body)["messages"])
    assert PERSON in sent and EMAIL not in sent  # "upload anyway" is about the asked category only
    # the page names the model the server reports, picked in its header
    served = [m["id"] for m in httpx.get(web["gw"].url + "/v1/models").json()["data"]]
    assert json.loads(body)["model"] == served[0] == page.input_value("#model")
    assert page.locator("#model option").all_inner_texts() == served
    page.close()


def test_skip_this_step(web):
    n = len(web["proxy"].requests)
    page = ask(web, "skip")
    text, finish = answer(page, "skip", "Skip this step")
    assert finish == "content_filter" and "not processed" in text
    assert len(web["proxy"].requests) == n
    # the skipped message is not part of the conversation any more: the next one goes out alone
    page.fill("#input", "Say hello")
    page.click("#send")
    page.wait_for_function("document.querySelectorAll('.msg.assistant[data-done]').length === 2", timeout=60000)
    [(_, body)] = web["proxy"].requests[n:]
    assert json.loads(body)["messages"] == [{"role": "user", "content": "Say hello"}]
    assert json.loads(body)["model"] == page.input_value("#model") != ""
    page.screenshot(path=str(ART / "skip-next.png"))
    page.close()
