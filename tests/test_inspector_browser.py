"""The inspector page driven in a real headless browser (Debian's chromium and chromium-driver,
through selenium; scripts/run_tests.sh installs them when it can). It shows a memory only to the
key it is given, pages through it, explains a Search, forgets, reviews and deletes, shows stored
markup as text that never runs, keeps to its Content-Security-Policy, and fits 400 px.

Without a browser these tests skip and say why. One browser serves the whole module; a failed
test leaves a screenshot and the page's markup in its temporary directory."""

from __future__ import annotations

import os
import shutil

import pytest
from conftest import Client, start_app

from aml_retriever.memory.lifecycle import Statements

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed "
                                "(scripts/run_tests.sh installs it as a test-only tool)")
from selenium.common.exceptions import NoAlertPresentException, WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

KEY = "browser-key"
WAIT_S = 10
SESSION_MESSAGES = 45  # three pages of the page's 20
LAUNCH = "The launch moved to August 14, after the supplier's delay."
XSS_IMG = '<img src=x onerror="window.__xss = 1">'
XSS_SCRIPT = "<script>window.__xss = 2</script>"
LOCKER = "Forget me: the locker code is 4512."
LONG_TOKEN = "unbroken-" + "x" * 300
MARKUP_USER = "team/<img src=y onerror=window.__xss=3> é"  # a slash, markup, a space, non-ASCII
BOB_SECRET = "Bob's only note: the boat is called Heron."


def find_browser() -> tuple[str, str] | None:
    """Chromium and its driver, where Debian (or another distribution) puts them."""
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    driver = shutil.which("chromedriver") or next(
        (p for p in ("/usr/lib/chromium/chromedriver", "/usr/bin/chromedriver") if os.path.exists(p)), None)
    return (browser, driver) if browser and driver else None


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    app = start_app(tmp_path_factory.mktemp("browser"), api_key=KEY)
    c = Client(app.port, api_key=KEY)
    start = 1_785_000_000_000
    assert c.add("alice", "a1", [f"note {i}: errand number {i}" for i in range(1, SESSION_MESSAGES + 1)],
                 session="s1", start_ms=start).status == 200
    assert c.add("alice", "a2", [LAUNCH, XSS_IMG, XSS_SCRIPT, LOCKER, LONG_TOKEN], session="s2",
                 start_ms=start + 3_600_000).status == 200
    assert c.add("bob", "b1", [BOB_SECRET]).status == 200
    assert c.add("carol", "c1", ["Carol keeps bees."]).status == 200
    assert c.add(MARKUP_USER, "x1", ["A user whose id is markup."]).status == 200
    dave = Statements(app.service, "dave", "mcp")
    for text in ("Dave prefers tea in the morning.", "Dave moved to Lisbon."):
        dave.remember("s1", text, "fact", origin="agent")
    c.close()
    yield app
    app.stop()


@pytest.fixture(scope="module")
def driver():
    found = find_browser()
    if found is None:
        pytest.skip("no chromium and chromedriver on this machine (Debian: apt-get install chromium "
                    "chromium-driver; scripts/run_tests.sh does it when run as root)")
    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    # In a container: no user namespaces for the sandbox, a small /dev/shm.
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,900",
                     "--disable-gpu", "--no-first-run", "--disable-extensions"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        browser = webdriver.Chrome(options=options, service=webdriver.ChromeService(found[1]))
    except WebDriverException as exc:
        pytest.skip(f"chromium would not start: {str(exc.msg or exc).splitlines()[0]}")
    yield browser
    browser.quit()


@pytest.fixture
def page(driver, server, tmp_path, request):
    """The page freshly loaded with no key in the tab; on failure, a screenshot under tmp_path."""
    try:
        driver.switch_to.alert.dismiss()  # a confirmation a failed test left open
    except NoAlertPresentException:
        pass
    driver.get(f"http://127.0.0.1:{server.port}/ui/")
    driver.execute_script("sessionStorage.clear()")
    driver.refresh()
    failed_before = request.session.testsfailed
    yield driver
    # The test's result is counted before its fixtures are torn down.
    if request.session.testsfailed > failed_before:
        driver.save_screenshot(str(tmp_path / "failure.png"))
        (tmp_path / "failure.html").write_text(driver.page_source)
        print(f"screenshot and markup of the failed page: {tmp_path}")
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def wait(driver, condition, what: str):
    return WebDriverWait(driver, WAIT_S, poll_frequency=0.05).until(lambda d: condition(d), message=what)


def status(driver) -> str:
    return driver.find_element(By.ID, "status").text


def use_key(driver, key: str = KEY) -> None:
    field = driver.find_element(By.ID, "key")
    field.clear()
    field.send_keys(key, Keys.ENTER)


def texts(driver, css: str) -> list[str]:
    """The shown text of every element `css` selects, read at one instant (the page may be
    replacing them meanwhile)."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => e.innerText)", css)


def users_shown(driver) -> None:
    use_key(driver)
    wait(driver, lambda d: "alice" in texts(d, "#users li button"), "the users listed")


def open_user(driver, user_id: str) -> None:
    users_shown(driver)
    button = next(b for b in driver.find_elements(By.CSS_SELECTOR, "#users li button") if b.text == user_id)
    button.click()
    wait(driver, lambda d: d.find_element(By.ID, "user-id").text == user_id
         and d.find_elements(By.CSS_SELECTOR, "#messages li"), f"{user_id}'s messages shown")


def contents(driver, list_id: str) -> list[str]:
    return texts(driver, f"#{list_id} li .content")


def click_more(driver, list_id: str, expected: int) -> None:
    driver.find_element(By.ID, f"more-{list_id}").click()
    wait(driver, lambda d: len(contents(d, list_id)) == expected, f"{expected} items in #{list_id}")


def shows_no_data(driver) -> None:
    source = driver.page_source
    for text in ("alice", "bob", "carol", "errand", "Heron", "launch", "locker"):
        assert text not in source, text
    assert not driver.find_element(By.ID, "main").is_displayed()


def test_typing_the_key_lists_the_users_and_the_tab_keeps_it(page):
    users_shown(page)
    listed = texts(page, "#users li")
    alice = next(item for item in listed if item.startswith("alice"))
    assert f"{SESSION_MESSAGES + 5} messages" in alice and "2 sessions" in alice
    assert {"bob", "carol", "dave", MARKUP_USER} <= set(texts(page, "#users li button"))
    page.refresh()  # same tab: the key is kept, the users shown again
    wait(page, lambda d: "alice" in texts(d, "#users li button"), "the users listed after a reload")
    page.find_element(By.ID, "clear-key").click()
    assert status(page) == "Key cleared." and page.execute_script("return sessionStorage.length") == 0
    shows_no_data(page)


def test_a_user_is_paged_through_every_message_exactly_once(page):
    open_user(page, "alice")
    assert len(contents(page, "messages")) == 20
    click_more(page, "messages", 40)
    click_more(page, "messages", SESSION_MESSAGES + 5)
    assert not page.find_element(By.ID, "more-messages").is_displayed()
    shown = contents(page, "messages")
    expected = {f"note {i}: errand number {i}" for i in range(1, SESSION_MESSAGES + 1)}
    expected |= {LAUNCH, XSS_IMG, XSS_SCRIPT, LOCKER, LONG_TOKEN}
    assert len(shown) == len(set(shown)) and set(shown) == expected
    assert shown[0] == LONG_TOKEN and shown[-1] == "note 1: errand number 1"  # newest first
    assert BOB_SECRET not in page.page_source  # another user's memory never appears


def test_a_session_narrows_the_messages(page):
    open_user(page, "alice")
    assert texts(page, "#sessions li button") == ["s2", "s1"]  # the latest first
    next(b for b in page.find_elements(By.CSS_SELECTOR, "#sessions li button") if b.text == "s2").click()
    wait(page, lambda d: len(contents(d, "messages")) == 5, "session s2's five messages")
    assert set(contents(page, "messages")) == {LAUNCH, XSS_IMG, XSS_SCRIPT, LOCKER, LONG_TOKEN}
    assert page.find_element(By.ID, "messages-scope").text == "in session s2"
    page.find_element(By.ID, "all-sessions").click()
    wait(page, lambda d: len(contents(d, "messages")) == 20, "every session's first page")


def test_a_search_shows_each_hit_with_its_explanation(page, server):
    open_user(page, "alice")
    query = page.find_element(By.ID, "query")
    query.send_keys("When did the launch move?", Keys.ENTER)  # Enter submits
    wait(page, lambda d: contents(d, "hits"), "the hits")
    assert contents(page, "hits")[0] == LAUNCH
    first = page.find_element(By.CSS_SELECTOR, "#hits > li")
    rows = first.find_elements(By.CSS_SELECTOR, ".signal")
    shown = {r.find_element(By.CSS_SELECTOR, ".name").text: r.find_element(By.CSS_SELECTOR, ".why").text
             for r in rows}
    # What the page says is what the server explains: same signals, ranks and shares.
    c = Client(server.port, api_key=KEY)
    answer = c.search("alice", "When did the launch move?", explain=True).body["data"][0]
    c.close()
    listed = [s for s in answer["explain"]["signals"] if s["rank"] is not None]
    assert listed and "lexical" in shown
    assert shown == {s["signal"]: f"rank {s['rank']} · weight {s['weight']:g} · "
                     f"{round(s['share'] * 100)}% of the score" for s in listed}
    bars = [float(m.get_attribute("value")) for m in first.find_elements(By.CSS_SELECTOR, ".signal meter")]
    assert bars == [s["share"] for s in listed] and abs(sum(bars) - 1) < 1e-6
    assert len(contents(page, "hits")) == len(set(contents(page, "hits"))) <= 10


def test_forgetting_a_message_removes_it_for_good(page, server):
    open_user(page, "alice")
    next(b for b in page.find_elements(By.CSS_SELECTOR, "#sessions li button") if b.text == "s2").click()
    wait(page, lambda d: LOCKER in contents(d, "messages"), "the message to forget")
    row = next(li for li in page.find_elements(By.CSS_SELECTOR, "#messages > li") if LOCKER in li.text)
    row.find_element(By.XPATH, ".//button[starts-with(@aria-label, 'Forget message')]").click()
    page.switch_to.alert.dismiss()  # a change of mind keeps it
    assert LOCKER in contents(page, "messages")
    row.find_element(By.XPATH, ".//button[starts-with(@aria-label, 'Forget message')]").click()
    page.switch_to.alert.accept()
    wait(page, lambda d: LOCKER not in contents(d, "messages"), "the message gone from the list")
    assert status(page).endswith("forgotten.") and LAUNCH in contents(page, "messages")  # control
    c = Client(server.port, api_key=KEY)
    assert LOCKER not in c.contents("alice", "locker code 4512")
    assert LAUNCH in c.contents("alice", "launch August")
    c.close()
    open_user(page, "alice")  # shown afresh from the server: still gone, and audited
    wait(page, lambda d: any(" forget " in f" {t} " for t in texts(d, "#audit li")), "the forget event")
    assert LOCKER not in page.page_source


def test_a_wrong_key_shows_nothing_of_the_memory(page):
    open_user(page, "alice")
    assert "errand" in page.page_source  # populated control
    use_key(page, "not-the-key")
    wait(page, lambda d: status(d) == "Wrong or missing key.", "the refusal")
    shows_no_data(page)
    page.refresh()  # the wrong key, kept by the tab, shows nothing either
    wait(page, lambda d: status(d) == "Wrong or missing key.", "the refusal after a reload")
    shows_no_data(page)
    use_key(page, "")
    wait(page, lambda d: status(d) == "Wrong or missing key.", "the refusal of no key")
    shows_no_data(page)


def test_a_key_changed_on_the_server_hides_what_was_shown(page, tmp_path):
    app = start_app(tmp_path, api_key="old-key")
    port = app.port
    try:
        Client(port, api_key="old-key").add("erin", "e1", ["Erin's note about the harbour."])
        page.get(f"http://127.0.0.1:{port}/ui/")
        use_key(page, "old-key")
        wait(page, lambda d: "erin" in texts(d, "#users li button"), "erin listed")
        page.find_element(By.CSS_SELECTOR, "#users li button").click()
        wait(page, lambda d: "harbour" in " ".join(contents(d, "messages")), "erin's note shown")
    finally:
        app.stop()
    app = start_app(tmp_path, api_key="new-key", port=port)  # the same server, its key rotated
    try:
        page.find_element(By.ID, "query").send_keys("harbour", Keys.ENTER)
        wait(page, lambda d: status(d) == "Wrong or missing key.", "the refusal")
        assert "harbour" not in page.page_source and "erin" not in page.page_source
        assert not page.find_element(By.ID, "main").is_displayed()
    finally:
        app.stop()


def test_stored_markup_is_shown_as_text_and_never_runs(page):
    open_user(page, "alice")
    next(b for b in page.find_elements(By.CSS_SELECTOR, "#sessions li button") if b.text == "s2").click()
    wait(page, lambda d: XSS_IMG in contents(d, "messages"), "the stored markup shown")
    assert XSS_SCRIPT in contents(page, "messages")
    assert MARKUP_USER in texts(page, "#users li button")
    page.find_element(By.ID, "query").send_keys("onerror script window", Keys.ENTER)
    wait(page, lambda d: any(XSS_IMG in hit for hit in contents(d, "hits")), "the markup among the hits")
    assert page.execute_script("return document.querySelectorAll('main img, main script').length") == 0
    open_user(page, MARKUP_USER)  # its id travels in the path, percent-encoded
    assert contents(page, "messages") == ["A user whose id is markup."]
    assert page.find_element(By.ID, "user-id").text == MARKUP_USER
    assert page.execute_script("return document.querySelectorAll('main img, main script').length") == 0
    assert page.execute_script("return window.__xss") is None


def test_the_policy_is_enforced_by_the_browser(page):
    page.execute_script(
        "window.__refused = [];"
        "document.addEventListener('securitypolicyviolation', e => __refused.push(e.effectiveDirective));"
        "const s = document.createElement('script'); s.textContent = 'window.__inline = 1';"
        "document.body.append(s);")
    wait(page, lambda d: d.execute_script("return __refused.length"), "the refusal reported")
    assert page.execute_script("return [__refused, window.__inline]") == [["script-src-elem"], None]
    scripts = page.execute_script("return [...document.scripts].filter(s => s.src).map(s => s.src)")
    assert [s.rsplit("/", 2)[-2:] for s in scripts] == [["ui", "app.js"]]


def test_proposed_statements_are_confirmed_or_rejected(page, server):
    open_user(page, "dave")
    wait(page, lambda d: len(contents(d, "proposed")) == 2, "two proposed statements")
    tea, lisbon = page.find_elements(By.CSS_SELECTOR, "#proposed > li")
    assert "Dave prefers tea" in tea.text and "Dave moved to Lisbon" in lisbon.text
    tea.find_element(By.XPATH, ".//button[text()='Confirm']").click()
    wait(page, lambda d: len(contents(d, "proposed")) == 1, "one left after confirming")
    lisbon.find_element(By.XPATH, ".//button[text()='Reject']").click()
    page.switch_to.alert.accept()
    wait(page, lambda d: not contents(d, "proposed"), "none left after rejecting")
    left = Statements(server.service, "dave", "test")
    assert left.proposed(10) == []
    assert [s["trust"] for s in left.with_text("Dave prefers tea in the morning.")] == ["confirmed"]
    assert left.with_text("Dave moved to Lisbon.") == []
    open_user(page, "dave")
    wait(page, lambda d: {"confirm", "reject"} <= {w for t in texts(d, "#audit li") for w in t.split(" · ")},
         "the review in the audit trail")


def test_a_user_is_deleted_only_after_typing_its_id(page, server):
    open_user(page, "carol")
    field, button = page.find_element(By.ID, "delete-confirm"), page.find_element(By.ID, "delete-user")
    field.send_keys("caro")
    assert not button.is_enabled()
    field.send_keys(Keys.ENTER)  # Enter with the wrong id deletes nothing
    field.send_keys("l")
    assert button.is_enabled()
    field.send_keys("x")
    assert not button.is_enabled()
    c = Client(server.port, api_key=KEY)
    assert c.contents("carol", "bees")  # still there
    field.send_keys(Keys.BACKSPACE, Keys.ENTER)
    wait(page, lambda d: status(d) == "User carol deleted.", "the deletion")
    assert "carol" not in texts(page, "#users li button") and "alice" in texts(page, "#users li button")
    assert c.contents("carol", "bees") == [] and c.contents("bob", "boat Heron")
    c.close()


def test_the_page_works_from_the_keyboard(page):
    key = page.find_element(By.ID, "key")
    key.send_keys(KEY, Keys.ENTER)
    wait(page, lambda d: "alice" in texts(d, "#users li button"), "the users listed")
    active = page.switch_to.active_element
    for _ in range(12):  # Tab onwards to alice's button, then Enter opens it
        active.send_keys(Keys.TAB)
        active = page.switch_to.active_element
        if active.text == "alice":
            break
    assert active.text == "alice" and active.tag_name == "button"
    assert page.execute_script("return getComputedStyle(document.activeElement).outlineStyle") == "solid"
    active.send_keys(Keys.ENTER)
    wait(page, lambda d: d.find_element(By.ID, "user-id").text == "alice", "alice opened")
    for field in page.find_elements(By.CSS_SELECTOR, "input"):
        label = page.find_elements(By.CSS_SELECTOR, f"label[for='{field.get_attribute('id')}']")
        assert label and label[0].text, field.get_attribute("id")


def test_the_page_fits_400_px_without_sideways_scrolling(page):
    page.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                         {"width": 400, "height": 800, "deviceScaleFactor": 1, "mobile": True})
    open_user(page, "alice")  # its newest message is one 309-character word; a user id is markup
    assert LONG_TOKEN in contents(page, "messages") and MARKUP_USER in texts(page, "#users li button")
    page.find_element(By.ID, "query").send_keys("launch", Keys.ENTER)
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#hits .signal"), "an explanation")
    width, scroll = page.execute_script("return [window.innerWidth, document.documentElement.scrollWidth]")
    assert width == 400 and scroll <= width
    users, user = (page.find_element(By.ID, name).rect for name in ("users-panel", "user-panel"))
    assert users["x"] == user["x"] and user["y"] > users["y"]  # one column: the user below the users
    for panel in (users, user):
        assert panel["x"] >= 0 and panel["x"] + panel["width"] <= 400
