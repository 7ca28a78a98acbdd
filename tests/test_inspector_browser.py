"""The inspector page driven in a real headless browser (Debian's chromium and chromium-driver,
through selenium; scripts/run_tests.sh installs them when it can). It shows a memory only to the
key it is given, pages through it, explains a Search (a window hit as its messages with their roles),
forgets, reviews and deletes, filters the users listed and opens one by id, shows times compact and
local, shows each message's speaker by the name the conversation gives its role ("Caroline (user)")
and the user's speakers with their evidence, shows stored markup as text that never runs, keeps to its
Content-Security-Policy, and fits 400 px with the users folded away once a user is open. Through a real
cluster router (HAProxy, which answers GET /users 404) it says so and opens users by id; everything
else works as on one server. After a forget it reads the audit (newest first), the counts and the
hits again; it labels the answer window's context as not ranked, with each message's reason; it asks
for no key where the server needs none; Enter opens the one listed user whose id starts with the text
typed; the address keeps the open user, its session and its query across a reload, back and forward.

The page draws a list when its answer comes: a test waits for the state that marks the drawing done
(never for one the list shown before also meets) and finds an element afresh after anything that may
draw it again.

Without a browser these tests skip and say why. One browser serves the whole module; a failed
test leaves a screenshot and the page's markup in its temporary directory."""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

import pytest
from conftest import Client, free_port, start_app

from aml_retriever.cluster import control
from aml_retriever.cluster.haproxy import version as haproxy_version
from aml_retriever.cluster.sharding import bucket_of, read_map
from aml_retriever.common.errors import ClusterError
from aml_retriever.memory.lifecycle import Statements
from aml_retriever.memory.service import MemoryService
from aml_retriever.storage.store import Store

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed "
                                "(scripts/run_tests.sh installs it as a test-only tool)")
from selenium.common.exceptions import NoAlertPresentException, WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
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
FRANK_OLD, FRANK_NEW = "Frank's first note.", "Frank's parking spot is 12."
# A conversation whose Search for WINDOW_QUERY returns a window of three messages of two roles
# first (its words are matched through the window; the lexical list, of single messages, has no
# place for it).
CONVERSATION = [
    ("user", "We're planning a week in Lisbon with my sister Ana."),
    ("assistant", "Nice. Do you have dates yet?"),
    ("user", "The trip starts on September 12 with the morning flight; we fly back on the 19th."),
    ("user", "Ana is vegetarian, so keep that in mind for restaurants."),
    ("user", "When do we ship?"),
    ("assistant", "Right after the launch."),
]
WINDOW_QUERY = "When do we ship the launch?"
START_MS = 1_785_000_000_000
# A conversation that names both sides ("Hey Mel!", "Hey Caroline!"): the assistant is Mel and
# Melanie (2 mentions each: m1 and m9, m3 and m7), the user Caroline (m2, m4, m6); Jon, once, is
# attached to no one; m5 names its own speaker in its text. Sent as two sessions (`add_named`):
# a name is attached to a role given it in two sessions at least.
NAMED = [
    ("user", "Hey Mel! Good to see you!"),
    ("assistant", "Hey Caroline! Good to see you too."),
    ("user", "Thanks, Melanie! I started painting again."),
    ("assistant", "That's lovely, Caroline."),
    ("user", "Caroline: I'll bring the paints on Sunday."),
    ("assistant", "See you on Sunday, Caroline!"),
    ("user", "Bye Melanie! And cheers, Jon."),
    ("assistant", "Sure thing."),
    ("user", "Hi Mel, one more thing about the easel."),
]
SPEAKERS_LINE = "Speakers: assistant: Mel, Melanie (4 mentions) · user: Caroline (3 mentions)"


def add_named(c: Client, user: str) -> None:
    """NAMED stored for `user`, its first five turns in session "talk", the rest in "talk-2"."""
    for number, (session, turns) in enumerate((("talk", NAMED[:5]), ("talk-2", NAMED[5:]))):
        response = c.post("/add", {"request_id": f"n{number}", "user_id": user, "session_id": session,
                                   "messages": [{"role": role, "content": content,
                                                 "timestamp": START_MS + (number * 5 + i) * 60_000}
                                                for i, (role, content) in enumerate(turns)]})
        assert response.status == 200, response.body


def add_conversation(c: Client, user: str, request_id: str,
                     turns: list[tuple[str, str]] = CONVERSATION) -> None:
    """CONVERSATION (or `turns`) stored for `user` in session "talk", a minute apart: its messages are
    m1, m2..."""
    response = c.post("/add", {"request_id": request_id, "user_id": user, "session_id": "talk", "messages": [
        {"role": role, "content": content, "timestamp": START_MS + i * 60_000}
        for i, (role, content) in enumerate(turns)]})
    assert response.status == 200, response.body


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
    start = START_MS
    assert c.add("alice", "a1", [f"note {i}: errand number {i}" for i in range(1, SESSION_MESSAGES + 1)],
                 session="s1", start_ms=start).status == 200
    assert c.add("alice", "a2", [LAUNCH, XSS_IMG, XSS_SCRIPT, LOCKER, LONG_TOKEN], session="s2",
                 start_ms=start + 3_600_000).status == 200
    assert c.add("bob", "b1", [BOB_SECRET]).status == 200
    assert c.add("carol", "c1", ["Carol keeps bees."]).status == 200
    assert c.add(MARKUP_USER, "x1", ["A user whose id is markup."]).status == 200
    assert c.add("frank", "f1", [FRANK_OLD], session="f1", start_ms=start).status == 200
    assert c.add("frank", "f2", [FRANK_NEW], session="f2", start_ms=start + 3_600_000).status == 200
    add_conversation(c, "gina", "g1")
    add_named(c, "nora")
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


def user_opened(driver, user_id: str) -> None:
    """Waits until the page has finished opening `user_id`: its four lists drawn (each holds at least
    an item or "None."; opening empties them first) and the focus moved to its title, the page's last
    step. Until then a list may still be drawn over what a test reads, or the focus taken from a field
    a test types in."""
    wait(driver, lambda d: d.execute_script(
        "return document.getElementById('user-id').textContent === arguments[0]"
        " && ['sessions', 'messages', 'proposed', 'audit']"
        "    .every(id => document.getElementById(id).children.length)"
        " && document.activeElement === document.getElementById('user-title')", user_id),
        f"{user_id} opened")


def open_user(driver, user_id: str) -> None:
    users_shown(driver)
    button = next(b for b in driver.find_elements(By.CSS_SELECTOR, "#users li button") if b.text == user_id)
    button.click()
    user_opened(driver, user_id)


def choose_session(driver, session_id: str) -> None:
    """Clicks a session; the messages are drawn afresh once the page's answer comes (see show_session)."""
    buttons = driver.find_elements(By.CSS_SELECTOR, "#sessions li button")
    next(b for b in buttons if b.text == session_id).click()


def show_session(driver, session_id: str, among: set[str]) -> None:
    """Narrows the messages to a session and waits until they are drawn: until every message shown is
    one of the session's (`among`). The list shown before, every session's, holds some of them too,
    and is replaced when the page's answer comes."""
    choose_session(driver, session_id)
    wait(driver, lambda d: set(contents(d, "messages")) <= among and contents(d, "messages"),
         f"session {session_id}'s messages")


def confirmation(driver):
    """The confirm() dialog a click opened."""
    return wait(driver, expected_conditions.alert_is_present(), "the confirmation")


def forget_button(driver, content: str):
    """The Forget button of the row showing `content`, found now: a row found before the list was drawn
    again is a stale element."""
    row = next(li for li in driver.find_elements(By.CSS_SELECTOR, "#messages > li") if content in li.text)
    return row.find_element(By.XPATH, ".//button[starts-with(@aria-label, 'Forget message')]")


def review_button(driver, content: str, verb: str):
    """The Confirm or Reject button of the proposed statement showing `content`, found now."""
    row = next(li for li in driver.find_elements(By.CSS_SELECTOR, "#proposed > li") if content in li.text)
    return row.find_element(By.XPATH, f".//button[text()='{verb}']")


def contents(driver, list_id: str) -> list[str]:
    return texts(driver, f"#{list_id} li .content")


def hit_contents(driver) -> list[str]:
    """Each hit's text as Search answers it: a window's messages joined by newlines."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#hits > li:not(.empty)')]"
        "  .map(li => [...li.querySelectorAll('.content')].map(e => e.innerText).join('\\n'))")


def click_user(driver, user_id: str) -> None:
    """Opens a user from the list shown, without loading the page again."""
    button = next(b for b in driver.find_elements(By.CSS_SELECTOR, "#users li button") if b.text == user_id)
    button.click()
    user_opened(driver, user_id)


def listed_users(driver) -> list[str]:
    """The users the list shows now (the filter hides the others)."""
    return texts(driver, "#users > li:not([hidden]) button")


def search_for(driver, query: str, shown: list[str] | None = None) -> None:
    """Searches `query` and waits for its hits (for `shown`, their contents, when hits were shown
    before: the page replaces them all at once when the answer comes)."""
    field = driver.find_element(By.ID, "query")
    field.clear()
    field.send_keys(query, Keys.ENTER)
    if shown is None:
        wait(driver, lambda d: d.execute_script("return document.querySelector('#hits > li') !== null"),
             f"the hits of {query!r}")
    else:
        wait(driver, lambda d: hit_contents(d) == shown, f"the hits of {query!r}")


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
    show_session(page, "s2", {LAUNCH, XSS_IMG, XSS_SCRIPT, LOCKER, LONG_TOKEN})
    assert set(contents(page, "messages")) == {LAUNCH, XSS_IMG, XSS_SCRIPT, LOCKER, LONG_TOKEN}
    assert page.find_element(By.ID, "messages-scope").text == "in session s2"
    page.find_element(By.ID, "all-sessions").click()
    wait(page, lambda d: len(contents(d, "messages")) == 20, "every session's first page")


def test_a_search_shows_each_hit_with_its_explanation(page, server):
    open_user(page, "alice")
    query = page.find_element(By.ID, "query")
    query.send_keys("When did the launch move?", Keys.ENTER)  # Enter submits
    wait(page, lambda d: hit_contents(d), "the hits")
    assert hit_contents(page)[0] == LAUNCH
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
    assert len(hit_contents(page)) == len(set(hit_contents(page))) <= 10


def test_forgetting_a_message_removes_it_for_good(page, server):
    open_user(page, "alice")
    # The message is on every session's first page too: wait for session s2's own list, or the row
    # found would be replaced under the test when s2's answer comes.
    show_session(page, "s2", {LAUNCH, XSS_IMG, XSS_SCRIPT, LOCKER, LONG_TOKEN})
    assert LOCKER in contents(page, "messages")
    forget_button(page, LOCKER).click()
    confirmation(page).dismiss()  # a change of mind keeps it
    assert LOCKER in contents(page, "messages")
    forget_button(page, LOCKER).click()
    confirmation(page).accept()
    wait(page, lambda d: LOCKER not in contents(d, "messages"), "the message gone from the list")
    assert status(page).endswith("forgotten.") and LAUNCH in contents(page, "messages")  # control
    c = Client(server.port, api_key=KEY)
    assert LOCKER not in c.contents("alice", "locker code 4512")
    assert LAUNCH in c.contents("alice", "launch August")
    c.close()
    open_user(page, "alice")  # shown afresh from the server: still gone, and audited
    wait(page, lambda d: any(" forget " in f" {t} " for t in texts(d, "#audit li")), "the forget event")
    assert LOCKER not in page.page_source


def test_a_message_forgotten_while_its_list_reloads_is_not_shown_again(page, server):
    open_user(page, "frank")
    page.execute_cdp_cmd("Network.enable", {})
    try:  # every answer now comes seconds after it is asked for
        page.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": False, "latency": 3000, "downloadThroughput": -1, "uploadThroughput": -1})
        forget = forget_button(page, FRANK_NEW)  # found before anything draws the list again
        choose_session(page, "f2")  # the list of session f2 is asked for ...
        forget.click()  # ... and the note forgotten from the list still shown
        confirmation(page).accept()
        # Session f2's list, read before the note was forgotten, is drawn while or after the forget is
        # answered: the note is shown neither on the row clicked nor on the list drawn since; the other
        # session's note goes when f2's list is drawn.
        wait(page, lambda d: status(d).endswith("forgotten.") and not contents(d, "messages"),
             "session f2 shown without its only note, forgotten")
        assert page.find_element(By.ID, "messages-scope").text == "in session f2"
    finally:
        page.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
        page.execute_cdp_cmd("Network.disable", {})
    c = Client(server.port, api_key=KEY)
    assert c.contents("frank", "parking spot") == [] and c.contents("frank", "first note") == [FRANK_OLD]
    c.close()
    open_user(page, "frank")
    assert contents(page, "messages") == [FRANK_OLD]


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
        user_opened(page, "erin")
        assert "harbour" in " ".join(contents(page, "messages"))
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
    show_session(page, "s2", {LAUNCH, XSS_IMG, XSS_SCRIPT, LOCKER, LONG_TOKEN})
    assert {XSS_IMG, XSS_SCRIPT} <= set(contents(page, "messages"))
    assert MARKUP_USER in texts(page, "#users li button")
    page.find_element(By.ID, "query").send_keys("onerror script window", Keys.ENTER)
    wait(page, lambda d: any(XSS_IMG in hit for hit in hit_contents(d)), "the markup among the hits")
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
    assert contents(page, "proposed") == ["Dave prefers tea in the morning.", "Dave moved to Lisbon."]
    review_button(page, "Dave prefers tea", "Confirm").click()
    wait(page, lambda d: contents(d, "proposed") == ["Dave moved to Lisbon."], "one left after confirming")
    review_button(page, "Dave moved to Lisbon", "Reject").click()
    confirmation(page).accept()
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
    for _ in range(30):  # Tab onwards to alice's button, then Enter opens it
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
    assert LONG_TOKEN in contents(page, "messages")
    page.find_element(By.ID, "query").send_keys("launch", Keys.ENTER)
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#hits .signal"), "an explanation")
    page.find_element(By.CSS_SELECTOR, "#users-box > summary").click()  # the users, folded, shown again
    wait(page, lambda d: MARKUP_USER in texts(d, "#users li button"), "the users shown")
    search_for(page, WINDOW_QUERY)  # gina's messages are not alice's: no hit, a control of the Search
    page.find_element(By.XPATH, "//ul[@id='users']//button[text()='gina']").click()
    user_opened(page, "gina")
    search_for(page, WINDOW_QUERY)  # a window hit: its messages and roles fit too
    wait(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#hits .member"), "a window's messages")
    page.find_element(By.CSS_SELECTOR, "#users-box > summary").click()
    wait(page, lambda d: MARKUP_USER in texts(d, "#users li button"), "the users shown")
    width, scroll = page.execute_script("return [window.innerWidth, document.documentElement.scrollWidth]")
    assert width == 400 and scroll <= width
    users, user = (page.find_element(By.ID, name).rect for name in ("users-panel", "user-panel"))
    assert users["x"] == user["x"] and user["y"] > users["y"]  # one column: the user below the users
    for panel in (users, user):
        assert panel["x"] >= 0 and panel["x"] + panel["width"] <= 400


# ---- users: a filter over those listed, paging, opening by id ---------------------------------


def test_users_are_filtered_paged_and_opened_by_id(page, tmp_path):
    """GET /users has no filter of its own (cursor paging only): the filter covers the users listed,
    says when more are on the server, and Open user reaches any user by its exact id."""
    app = start_app(tmp_path, api_key=KEY)
    try:
        c = Client(app.port, api_key=KEY)
        for i in range(1, 46):
            assert c.add(f"user-{i:02d}", f"r{i}", [f"Note of user {i}."]).status == 200
        c.close()
        page.get(f"http://127.0.0.1:{app.port}/ui/")
        use_key(page)
        wait(page, lambda d: len(listed_users(d)) == 20, "the first page of users")
        assert listed_users(page)[0] == "user-45"  # newest first
        assert page.find_element(By.ID, "users-count").text == "20 users, more on the server"
        field = page.find_element(By.ID, "open-id")
        field.send_keys("USER-4")  # any part of the id, any case
        wait(page, lambda d: listed_users(d) == [f"user-{i}" for i in range(45, 39, -1)], "user-4x listed")
        assert page.find_element(By.ID, "users-count").text == "6 of 20 users, more on the server"
        field.send_keys(Keys.BACKSPACE, "1")  # "USER-1": none of the 20 listed (user-26..45)
        wait(page, lambda d: listed_users(d) == [], "no user listed matching")
        note = page.find_element(By.ID, "users-filtered").text
        assert note.startswith("No user listed matches.") and "More users" in note and "Open user" in note
        page.find_element(By.ID, "more-users").click()
        wait(page, lambda d: listed_users(d) == [f"user-{i}" for i in range(19, 9, -1)],
             "the next page's matches listed under the same filter")
        assert page.find_element(By.ID, "users-count").text == "10 of 40 users, more on the server"
        field.clear()
        field.send_keys("user-03", Keys.ENTER)  # not listed yet: opened by its exact id
        user_opened(page, "user-03")
        assert contents(page, "messages") == ["Note of user 3."] and status(page) == ""
        field = page.find_element(By.ID, "open-id")
        field.clear()
        field.send_keys("User-03", Keys.ENTER)  # ids are exact: another (empty) user, said so
        user_opened(page, "User-03")
        assert not contents(page, "messages") and "Note of user 3." not in page.page_source
        assert status(page).startswith("Nothing is stored for user User-03")
        page.find_element(By.ID, "open-id").clear()
        page.find_element(By.ID, "open-id").send_keys(Keys.ENTER)  # an empty id opens nothing
        assert page.find_element(By.ID, "user-id").text == "User-03"
    finally:
        app.stop()


# ---- times ------------------------------------------------------------------------------------


def test_times_are_shown_compact_and_local_with_the_exact_time_in_a_title(page, server):
    """Every stored time is a local "YYYY-MM-DD HH:MM" that never wraps, its ISO value in title
    and datetime; Kathmandu (UTC+5:45, no daylight saving) shifts the minutes as well as the hours."""
    page.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Asia/Kathmandu"})
    page.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                         {"width": 400, "height": 800, "deviceScaleFactor": 1, "mobile": True})
    try:
        open_user(page, "alice")
        c = Client(server.port, api_key=KEY)
        stored = c.request("GET", "/users/alice/messages?limit=20").body["messages"]
        c.close()
        shown = page.execute_script(
            "return [...document.querySelectorAll('#messages time')].map(t => [t.textContent, t.title,"
            " t.dateTime, t.getClientRects().length, getComputedStyle(t).whiteSpace])")
        kathmandu = timezone(timedelta(hours=5, minutes=45))

        def local(iso: str) -> str:
            utc = datetime.fromisoformat(iso.replace("Z", "+00:00"))
            return utc.astimezone(kathmandu).strftime("%Y-%m-%d %H:%M")

        assert shown == [[local(m["created_at"]), m["created_at"], m["created_at"], 1, "nowrap"]
                         for m in stored]
        assert shown[0][0] == "2026-07-26 00:05"  # START_MS + 1 h + 4 s: 2026-07-25 18:20:04 UTC
        for list_id in ("users", "sessions", "audit"):  # every list shows its times the same way
            times = page.execute_script(f"return [...document.querySelectorAll('#{list_id} time')]"
                                        ".map(t => [t.textContent, t.title])")
            assert times and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", text) and local(title) == text
                                 for text, title in times), (list_id, times)
        meta = " ".join(texts(page, "#messages .meta, #sessions .meta, #audit .meta"))
        assert not re.search(r"\d{4}-\d\d-\d\dT", meta)  # no raw ISO value left in the text
    finally:
        page.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ""})


# ---- a window hit -----------------------------------------------------------------------------


def check_window_hit(driver, c: Client, user: str) -> None:
    """Searches WINDOW_QUERY: the window hit shows each of its messages with its role, and its
    explanation says its words were matched through its window, not that lexical missed them."""
    answer = c.search(user, WINDOW_QUERY, explain=True).body["data"]
    search_for(driver, WINDOW_QUERY, [hit["content"] for hit in answer])
    place, window = next((i, hit) for i, hit in enumerate(answer) if hit["view"] == "window")
    ranks = {s["signal"]: s["rank"] for s in window["explain"]["signals"]}
    assert ranks["lexical"] is None and ranks["window"] is not None and len(window["source_message_ids"]) == 3
    row = driver.find_elements(By.CSS_SELECTOR, "#hits > li")[place]
    members = [tuple(m.find_element(By.CSS_SELECTOR, part).text for part in (".role", ".content"))
               for m in row.find_elements(By.CSS_SELECTOR, ".member")]
    expected = [CONVERSATION[int(m[1:]) - 1] for m in window["source_message_ids"]]
    assert members == expected and {role for role, _ in members} == {"user", "assistant"}
    said = row.find_element(By.CSS_SELECTOR, ".explain").text
    assert "matched through its window" in said
    assert not re.search(r"(not listed by|No part from)[^.\n]*\blexical\b", said), said
    assert f"window of {len(expected)} messages" in row.find_element(By.CSS_SELECTOR, ":scope > .meta").text
    answer = c.search(user, "Do you have dates yet?", explain=True).body["data"]  # control: a message hit
    search_for(driver, "Do you have dates yet?", [hit["content"] for hit in answer])
    assert answer[0]["view"] == "message" and answer[0]["content"] == CONVERSATION[1][1]
    single = driver.find_element(By.CSS_SELECTOR, "#hits > li")
    assert not single.find_elements(By.CSS_SELECTOR, ".member")
    assert "assistant" in single.find_element(By.CSS_SELECTOR, ":scope > .meta").text.split(" · ")
    assert "matched through its window" not in single.find_element(By.CSS_SELECTOR, ".explain").text


def test_a_window_hit_shows_its_messages_with_their_roles(page, server):
    open_user(page, "gina")
    c = Client(server.port, api_key=KEY)
    try:
        check_window_hit(page, c, "gina")
    finally:
        c.close()


# ---- speakers ---------------------------------------------------------------------------------


def speakers_line(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, "#speakers-box > summary").text


def said_by(driver) -> dict[str, str]:
    """Each message listed, by its text: who the page says said it (the part of its line after its id)."""
    return driver.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('#messages > li')].map(li =>"
        "  [li.querySelector('.content').innerText, li.querySelector('.meta').innerText.split(' · ')[1]]))")


def check_speakers(driver, c: Client, user: str) -> None:
    """`user` holds NAMED and is open: each message shows its speaker's name before its role (the
    role alone where its text names its speaker), the speakers line names both sides, and unfolded
    it shows each name's evidence as the server gives it, and the name attached to no one."""
    assert speakers_line(driver) == SPEAKERS_LINE
    expected = {content: role if content.startswith("Caroline: ") else
                f"{'Caroline' if role == 'user' else 'Melanie'} ({role})" for role, content in NAMED}
    assert said_by(driver) == expected
    answer = c.request("GET", f"/users/{user}/speakers").body
    names = [name for role in answer["speakers"] for name in role["names"]]
    assert [n["evidence"] for n in names] == [["m1", "m9"], ["m3", "m7"], ["m2", "m4", "m6"]]
    spans = driver.find_elements(By.CSS_SELECTOR, "#speakers-line .speaker")
    titles = [span.get_attribute("title") for span in spans]
    assert titles == ["evidence: messages " + ", ".join(n["evidence"]) for n in names]
    detail = driver.find_element(By.ID, "speakers")
    assert not detail.is_displayed()
    summary = driver.find_element(By.CSS_SELECTOR, "#speakers-box > summary")
    summary.send_keys(Keys.ENTER)  # the keyboard unfolds it
    wait(driver, lambda d: d.find_element(By.ID, "speakers").is_displayed(), "the speakers' evidence")
    assert [[line for line in item.splitlines() if line] for item in texts(driver, "#speakers > li")] == [
        ["assistant", "Mel · addressed 2 times · evidence m1, m9",
         "Melanie · addressed 2 times · evidence m3, m7"],
        ["user", "Caroline · addressed 3 times · evidence m2, m4, m6"]]
    assert driver.find_element(By.ID, "candidates").text.endswith(": Jon (assistant 1)")


def test_each_message_shows_its_speakers_name_and_the_speakers_their_evidence(page, server):
    page.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                         {"width": 400, "height": 800, "deviceScaleFactor": 1, "mobile": True})
    c = Client(server.port, api_key=KEY)
    try:
        open_user(page, "nora")
        check_speakers(page, c, "nora")
        width, scroll = page.execute_script(
            "return [window.innerWidth, document.documentElement.scrollWidth]")
        assert width == 400 and scroll <= width  # unfolded, at 400 px
        search_for(page, "painting again")  # a hit names its speaker too, as a message or in a window
        shown = page.execute_script(
            "return [...document.querySelectorAll('#hits > li')].flatMap(li => li.querySelector('.member')"
            "  ? [...li.querySelectorAll('.member')].map(m => [m.querySelector('.role').innerText,"
            "                                                 m.querySelector('.content').innerText])"
            "  : [[li.querySelector(':scope > .meta').innerText.split(' · ')[3],"
            "      li.querySelector('.content').innerText]])")
        assert ["Caroline (user)", NAMED[2][1]] in shown
    finally:
        c.close()
    field = page.find_element(By.ID, "open-id")  # control: a conversation that names nobody
    field.clear()
    field.send_keys("gina", Keys.ENTER)
    user_opened(page, "gina")
    assert speakers_line(page) == "Speakers: no name given to a role"
    assert set(said_by(page).values()) == {"user", "assistant"}
    assert not page.find_elements(By.CSS_SELECTOR, "#speakers > li") and "Melanie" not in page.page_source


# ---- switching users, narrow screens ----------------------------------------------------------


def test_opening_another_user_clears_the_query_the_hits_and_the_status(page):
    open_user(page, "alice")
    search_for(page, "launch")
    wait(page, lambda d: re.fullmatch(r"\d+ results?\.", status(d)), "the Search's status")
    assert page.find_element(By.ID, "query").get_attribute("value") == "launch"
    click_user(page, "bob")
    assert page.find_element(By.ID, "query").get_attribute("value") == ""
    assert status(page) == "" and not page.find_elements(By.CSS_SELECTOR, "#hits > li")
    assert contents(page, "messages") == [BOB_SECRET] and "launch" not in page.page_source.lower()


def test_on_a_narrow_screen_the_users_fold_away_once_a_user_is_open(page):
    page.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                         {"width": 400, "height": 800, "deviceScaleFactor": 1, "mobile": True})
    users_shown(page)
    users = page.find_element(By.ID, "users")
    assert users.is_displayed()
    click_user(page, "alice")
    assert not users.is_displayed()  # folded into its summary line
    summary = page.find_element(By.CSS_SELECTOR, "#users-box > summary")
    assert summary.is_displayed() and re.fullmatch(r"Listed: \d+ users", summary.text), summary.text
    # The user's content starts within the first screen: the search field is reached without
    # scrolling past the users (in document coordinates, whatever the page scrolled to).
    bottom = page.execute_script("const r = document.getElementById('query').getBoundingClientRect();"
                                 " return r.bottom + window.scrollY")
    assert bottom <= 800, bottom
    summary.send_keys(Keys.ENTER)  # the keyboard unfolds it again
    wait(page, lambda d: d.find_element(By.ID, "users").is_displayed(), "the users shown again")
    assert "bob" in listed_users(page)
    page.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                         {"width": 1200, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    click_user(page, "bob")  # wide: the users stay beside the user
    assert page.find_element(By.ID, "users").is_displayed()


# ---- through the cluster router ---------------------------------------------------------------


def haproxy_missing() -> str | None:
    if shutil.which("haproxy") is None:
        return "haproxy is not installed (Debian: apt-get install haproxy)"
    try:
        haproxy_version()
    except ClusterError as exc:
        return exc.message
    return None



@pytest.fixture
def cluster(tmp_path):
    """Two shards behind a real HAProxy (aml_retriever.cluster.control, as scripts/cluster.sh), with
    the module's key: the router's port and the cluster's layout."""
    missing = haproxy_missing()
    if missing is not None:
        pytest.skip(f"needs HAProxy 2.6 or later for the cluster router: {missing}")
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"api_key": KEY, "synchronous": "NORMAL", "checkpoint_interval": 0.2,
                                    "socket_timeout": 5.0}))
    layout = control.Layout(tmp_path / "cluster")
    port = free_port()
    control.start(layout, 2, port, "127.0.0.1", str(settings))
    try:
        yield port, layout
    finally:
        control.stop(layout)


def propose(layout: control.Layout, user: str, texts_: list[str]) -> None:
    """Statements an agent inferred for `user`, written into the store of the shard that holds it
    (as an agent's memory would): the HTTP API cannot make them."""
    shard = read_map(layout.router.map)[bucket_of(user)]
    store = Store(layout.store(shard), "NORMAL")
    try:
        statements = Statements(MemoryService(store), user, "mcp")
        for text in texts_:
            statements.remember("talk", text, "fact", origin="agent")
    finally:
        store.close()


def test_through_the_cluster_router_users_are_opened_by_id(page, cluster):
    port, layout = cluster
    c = Client(port, api_key=KEY)
    try:
        add_conversation(c, "hana", "h1")
        assert c.add("ivan", "i1", ["Ivan's note."]).status == 200
        assert c.request("GET", "/users?limit=20").status == 404  # the router refuses the listing
        propose(layout, "hana", ["Hana's sister is called Ana.", "Hana flies on September 12."])
        page.get(f"http://127.0.0.1:{port}/ui/")  # the page, served through the router
        use_key(page, "not-the-key")  # the router answers /users without the key: a shard checks it
        wait(page, lambda d: status(d) == "Wrong or missing key.", "the refusal")
        shows_no_data(page)
        use_key(page)
        wait(page, lambda d: d.find_element(By.ID, "router-note").is_displayed(), "the router's note")
        note = page.find_element(By.ID, "router-note").text
        assert "cluster router" in note and "each shard lists only its own" in note and "id" in note
        assert status(page) == "" and not page.find_element(By.ID, "users-box").is_displayed()
        assert page.switch_to.active_element.get_attribute("id") == "open-id"
        page.switch_to.active_element.send_keys("hana", Keys.ENTER)
        user_opened(page, "hana")
        assert texts(page, "#sessions li button") == ["talk"]
        assert contents(page, "messages") == [content for _, content in reversed(CONVERSATION)]
        assert contents(page, "proposed") == ["Hana's sister is called Ana.", "Hana flies on September 12."]
        check_window_hit(page, c, "hana")  # Search, and each window message read by its id
        assert speakers_line(page) == "Speakers: no name given to a role"  # read through the router
        forget_button(page, CONVERSATION[0][1]).click()
        confirmation(page).accept()
        wait(page, lambda d: CONVERSATION[0][1] not in contents(d, "messages"), "the message forgotten")
        review_button(page, "Hana's sister", "Confirm").click()
        wait(page, lambda d: contents(d, "proposed") == ["Hana flies on September 12."], "one confirmed")
        review_button(page, "Hana flies", "Reject").click()
        confirmation(page).accept()
        wait(page, lambda d: not contents(d, "proposed"), "one rejected")
        page.find_element(By.ID, "open-id").clear()
        page.find_element(By.ID, "open-id").send_keys("hana", Keys.ENTER)  # reopened: the audit
        user_opened(page, "hana")
        actions = {part for line in texts(page, "#audit li") for part in line.split(" · ")}
        assert {"add", "remember", "forget", "confirm", "reject"} <= actions
        assert CONVERSATION[0][1] not in c.contents("hana", "planning a week in Lisbon")
        page.find_element(By.ID, "delete-confirm").send_keys("hana", Keys.ENTER)
        wait(page, lambda d: status(d) == "User hana deleted.", "the deletion")
        assert page.find_element(By.ID, "router-note").is_displayed()  # back to opening by id
        assert c.request("GET", "/users/hana/messages").body["error"]["code"] == "unknown_user"
        assert c.contents("ivan", "note") == ["Ivan's note."]  # another user untouched
        add_named(c, "nora")  # the speakers, on whichever shard holds nora
        page.find_element(By.ID, "open-id").send_keys("nora", Keys.ENTER)
        user_opened(page, "nora")
        check_speakers(page, c, "nora")
    finally:
        c.close()


# ---- what an outside tester found -------------------------------------------------------------


def audit_seqs(driver) -> list[int]:
    """The audit events shown, by their numbers, top to bottom."""
    return [int(line.split(" · ")[0].lstrip("#")) for line in texts(driver, "#audit > li:not(.empty)")]


def hash_of(driver) -> str:
    return driver.execute_script("return location.hash")


KITE = ["The red kite nests by the river.", "Tea at four, as always.", "The kite festival is in May."]


def test_after_a_forget_the_audit_the_counts_and_the_hits_are_read_again(page, server):
    c = Client(server.port, api_key=KEY)
    try:
        assert c.add("hugo", "h1", KITE, session="k1").status == 200
    finally:
        c.close()
    open_user(page, "hugo")
    assert audit_seqs(page) == [1]
    assert "3 messages" in texts(page, "#users > li[data-user='hugo']")[0]
    search_for(page, "red kite")
    wait(page, lambda d: any(KITE[0] in hit for hit in hit_contents(d)), "the kite among the hits")
    forget_button(page, KITE[0]).click()
    confirmation(page).accept()
    wait(page, lambda d: audit_seqs(d) == [2, 1], "the forget at the top of the audit trail")
    newest = texts(page, "#audit > li")[0]
    assert " forget " in f" {newest} " and "messages m1" in newest
    wait(page, lambda d: hit_contents(d) and not any(KITE[0] in hit for hit in hit_contents(d)),
         "the hits read again without the message forgotten")
    assert any(KITE[2] in hit for hit in hit_contents(page))  # control: the other kite is still found
    wait(page, lambda d: "2 messages" in texts(d, "#sessions > li")[0], "the session's count read again")
    wait(page, lambda d: "2 messages" in texts(d, "#users > li[data-user='hugo']")[0],
         "the user's count read again")
    assert KITE[0] not in contents(page, "messages") and KITE[1] in contents(page, "messages")
    assert status(page) == "Message m1 forgotten."  # the Search run again says nothing over it
    assert page.find_element(By.ID, "user-id").text == "hugo"


def test_context_results_of_the_answer_window_are_labelled_and_show_no_score(page, tmp_path):
    app = start_app(tmp_path, api_key=KEY, answer_window_tokens=117760)
    try:
        c = Client(app.port, api_key=KEY)
        assert c.add("zoe", "z1", ["Zoe keeps a red kite.", "The weather was grey all week.",
                                   "We ate soup on Tuesday."]).status == 200
        answer = c.search("zoe", "red kite", explain=True).body["data"]
        c.close()
        assert [hit["view"] for hit in answer] == ["message", "context"] and answer[1]["score"] == 0
        reasons = answer[1]["explain"]["context"]
        assert answer[1]["explain"]["signals"] == [] and [r["message_id"] for r in reasons] == ["m2", "m3"]
        assert all(r["chosen"] for r in reasons)
        page.get(f"http://127.0.0.1:{app.port}/ui/")
        use_key(page)
        wait(page, lambda d: "zoe" in texts(d, "#users li button"), "zoe listed")
        click_user(page, "zoe")
        search_for(page, "red kite")
        wait(page, lambda d: hit_contents(d) == [hit["content"] for hit in answer], "the answer")
        ranked, context = texts(page, "#hits > li")
        assert "context · chosen to fill the reader's window, not ranked" in context
        assert "score" not in context and "no explanation" not in context and "Why it ranked" not in context
        shown = page.execute_script(
            "return [...document.querySelectorAll('#hits > li:nth-child(2) .reason')]"
            "  .map(r => [r.querySelector('.name').textContent, r.querySelector('.why').textContent])")
        assert shown == [[r["message_id"], r["chosen"]] for r in reasons]
        assert f"score {answer[0]['score']:.4f}" in ranked and "context" not in ranked  # control: ranked
        assert "Why it ranked here" in ranked
        views = page.execute_script(
            "return [...document.querySelectorAll('#hits > li')].map(li => li.dataset.view)")
        assert views == ["message", "context"]
    finally:
        app.stop()


def test_a_server_without_a_key_is_used_without_typing_one(page, server, tmp_path):
    app = start_app(tmp_path)  # no api_key
    try:
        assert Client(app.port).add("olga", "o1", ["Olga's note: no key here."]).status == 200
        page.get(f"http://127.0.0.1:{app.port}/ui/")
        wait(page, lambda d: "olga" in texts(d, "#users li button"), "the users listed without a key")
        assert "needs no API key" in page.find_element(By.ID, "key-note").text
        assert page.find_element(By.ID, "key-note").is_displayed() and status(page) == ""
        assert not page.find_element(By.ID, "key-form").is_displayed()  # no key box to fill
        assert page.find_element(By.ID, "key").get_attribute("value") == ""
        click_user(page, "olga")
        assert contents(page, "messages") == ["Olga's note: no key here."]
        page.find_element(By.ID, "show-key").click()  # a key may still be typed
        assert page.find_element(By.ID, "key-form").is_displayed()
        use_key(page, "any text")  # the key field still works: a key sent is not checked here
        wait(page, lambda d: "olga" in texts(d, "#users li button"), "the users listed with a key typed")
    finally:
        app.stop()
    page.get(f"http://127.0.0.1:{server.port}/ui/")  # control: a server with a key asks for it
    wait(page, lambda d: status(d) == "Type the API key and press Enter.", "the key asked for")
    assert not page.find_element(By.ID, "key-note").is_displayed()
    assert page.find_element(By.ID, "key-form").is_displayed()  # control: its key box shown
    shows_no_data(page)
    users_shown(page)  # and the key typed opens it


def test_enter_opens_the_one_listed_user_whose_id_starts_with_the_text_typed(page, tmp_path):
    app = start_app(tmp_path, api_key=KEY)
    try:
        c = Client(app.port, api_key=KEY)
        for user in ("alice", "amber", "bob", MARKUP_USER):
            assert c.add(user, "r-" + user, [f"{user}'s note."]).status == 200
        page.get(f"http://127.0.0.1:{app.port}/ui/")
        users_shown(page)
        field = page.find_element(By.ID, "open-id")
        field.send_keys("al")
        assert "Open user opens alice" in page.find_element(By.ID, "users-filtered").text
        field.send_keys(Keys.ENTER)  # alice alone starts with "al": Enter opens it
        user_opened(page, "alice")
        assert contents(page, "messages") == ["alice's note."] and status(page) == ""
        for typed, opened in (("BO", "bob"), ("team/<img", MARKUP_USER)):  # any case; markup
            field = page.find_element(By.ID, "open-id")
            field.clear()
            field.send_keys(typed, Keys.ENTER)
            user_opened(page, opened)
            assert contents(page, "messages") == [f"{opened}'s note."] and status(page) == ""
        field = page.find_element(By.ID, "open-id")
        field.clear()
        field.send_keys("a", Keys.ENTER)  # two start with it: the id typed, exactly, and the two named
        user_opened(page, "a")
        said = status(page)
        assert said.startswith("Nothing is stored for user a:") and "alice" in said and "amber" in said
        assert "Open user opens exactly the id typed." in page.find_element(By.ID, "users-filtered").text
        assert c.add("al", "r-al", ["al's own note."]).status == 200
        users_shown(page)  # listed again: "al" is a listed id now, opened as typed
        field = page.find_element(By.ID, "open-id")
        field.send_keys("al", Keys.ENTER)
        user_opened(page, "al")
        assert contents(page, "messages") == ["al's own note."]
        field = page.find_element(By.ID, "open-id")
        field.clear()
        field.send_keys("ali", Keys.ENTER)
        user_opened(page, "alice")
        c.close()
    finally:
        app.stop()


def test_the_address_keeps_the_user_the_session_and_the_query(page):
    open_user(page, "alice")
    assert hash_of(page) == "#user=alice"
    search_for(page, "launch")
    show_session(page, "s2", {LAUNCH, XSS_IMG, XSS_SCRIPT, LOCKER, LONG_TOKEN})
    hits = hit_contents(page)
    assert hits and hash_of(page) == "#user=alice&session=s2&q=launch"
    page.refresh()  # restored on load
    user_opened(page, "alice")
    wait(page, lambda d: hit_contents(d) == hits, "the hits again")
    assert page.find_element(By.ID, "query").get_attribute("value") == "launch"
    assert page.find_element(By.ID, "messages-scope").text == "in session s2"
    assert set(contents(page, "messages")) <= {LAUNCH, XSS_IMG, XSS_SCRIPT, LOCKER, LONG_TOKEN}
    click_user(page, "bob")
    assert hash_of(page) == "#user=bob"
    page.back()  # back: alice, her session and her query
    user_opened(page, "alice")
    wait(page, lambda d: hit_contents(d) == hits and d.find_element(By.ID, "messages-scope").text
         == "in session s2", "alice's state again")
    page.forward()
    user_opened(page, "bob")
    assert not page.find_elements(By.CSS_SELECTOR, "#hits > li")
    assert contents(page, "messages") == [BOB_SECRET]
    query = "launch & 100% é #2 /?=<b>"  # every character the fragment could misread
    search_for(page, query)
    assert hash_of(page) == "#user=bob&q=" + quote(query, safe="")
    click_user(page, MARKUP_USER)  # percent-encoded: a slash, markup, a space, non-ASCII
    assert hash_of(page) == "#user=" + quote(MARKUP_USER, safe="")
    page.refresh()
    user_opened(page, MARKUP_USER)
    assert contents(page, "messages") == ["A user whose id is markup."]
    page.back()  # bob and his query, exactly
    user_opened(page, "bob")
    wait(page, lambda d: d.find_element(By.ID, "query").get_attribute("value") == query, "bob's query")
    # The fragment edited (hashchange): the same user is searched again, not opened afresh.
    page.execute_script("document.querySelector('#messages > li').dataset.mark = 'kept';"
                        "location.hash = arguments[0]", "#user=bob&q=" + quote("boat Heron", safe=""))
    wait(page, lambda d: hit_contents(d) == [BOB_SECRET]
         and d.find_element(By.ID, "query").get_attribute("value") == "boat Heron", "the query edited")
    assert page.find_element(By.CSS_SELECTOR, "#messages > li").get_attribute("data-mark") == "kept"
    page.execute_script("location.hash = ''")  # no user named: none shown
    wait(page, lambda d: not d.find_element(By.ID, "user-panel").is_displayed(), "the user closed")
    assert "Heron" not in page.page_source
    assert KEY not in page.current_url and "key" not in page.current_url
    assert page.execute_script("return window.__xss") is None


def test_the_audit_trail_reads_newest_first_and_pages_on(page, server):
    c = Client(server.port, api_key=KEY)
    try:
        for i in range(1, 26):
            assert c.add("ivy", f"i{i}", [f"Ivy's note {i}."]).status == 200
    finally:
        c.close()
    open_user(page, "ivy")
    assert audit_seqs(page) == list(range(25, 5, -1))
    page.find_element(By.ID, "more-audit").click()
    wait(page, lambda d: len(audit_seqs(d)) == 25, "the next events")
    assert audit_seqs(page) == list(range(25, 0, -1))
    assert not page.find_element(By.ID, "more-audit").is_displayed()
