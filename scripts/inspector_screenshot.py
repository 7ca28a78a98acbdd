#!/usr/bin/env python3
"""Redraw docs/inspector.png: the inspector page over a small demo memory, one user open and a
Search explained (its first hit a window, shown as its messages with their speakers: the name the
conversation gives the user, "Maya", and the roles), as headless
chromium shows it. Times are drawn in --timezone (UTC unless told), so the picture does not depend
on the machine's.

Needs selenium (pip) and chromium with its driver (Debian: apt-get install chromium
chromium-driver), development tools only. The server runs on a loopback port over a temporary
store that is removed afterwards.

    python3 scripts/inspector_screenshot.py [--out docs/inspector.png] [--width 1200] [--timezone UTC]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aml_retriever.app import App  # noqa: E402
from aml_retriever.memory.lifecycle import Statements  # noqa: E402
from aml_retriever.memory.validation import parse_add  # noqa: E402
from aml_retriever.settings import load  # noqa: E402

KEY = "demo-key"
USER = "maya"
QUERY = "When does the Lisbon trip start?"
DAY_MS = 86_400_000
START_MS = 1_785_945_600_000  # 2026-08-05T16:00:00Z
CONVERSATIONS = [
    (USER, "trip", START_MS, [
        ("user", "We're planning a week in Lisbon with my sister Ana."),
        ("assistant", "Nice, Maya! Do you have dates yet?"),
        ("user", "The trip starts on September 12 with the morning flight; we fly back on the 19th."),
        ("user", "Ana is vegetarian, so keep that in mind for restaurants."),
    ]),
    (USER, "work", START_MS + 2 * DAY_MS, [
        ("user", "The launch review moved to Thursday at 10:00."),
        ("assistant", "Noted: launch review, Thursday 10:00. Good luck, Maya!"),
        ("user", "Before the trip I need to hand the Lisbon client notes to Jonas."),
    ]),
    ("sam", "s1", START_MS + DAY_MS, [("user", "Sam's bike is in the repair shop until Friday.")]),
]


def find_browser() -> tuple[str, str] | None:
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def seed(app: App) -> None:
    """The demo memory: two users, two sessions, one statement an agent proposed."""
    for n, (user, session, start, turns) in enumerate(CONVERSATIONS, 1):
        app.service.add(parse_add({
            "request_id": f"demo-{n}", "user_id": user, "session_id": session,
            "messages": [{"role": role, "content": content, "timestamp": start + i * 60_000}
                         for i, (role, content) in enumerate(turns)]}, 200))
    Statements(app.service, USER, "mcp").remember("trip", "Maya's sister Ana is vegetarian.", "fact",
                                                  origin="agent")


def shoot(url: str, out: Path, width: int, height: int, browser: tuple[str, str], zone: str) -> None:
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = browser[0]
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars",
                     f"--window-size={width},{height}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(browser[1]))
    try:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": zone})
        wait = WebDriverWait(driver, 10)
        driver.get(url + "/ui/")
        driver.find_element(By.ID, "key").send_keys(KEY, Keys.ENTER)
        wait.until(lambda d: d.find_elements(By.XPATH, f"//ul[@id='users']//button[text()='{USER}']"))
        driver.find_element(By.XPATH, f"//ul[@id='users']//button[text()='{USER}']").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#messages li .content"))
        driver.find_element(By.ID, "query").send_keys(QUERY, Keys.ENTER)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#hits .signal"))
        if not driver.find_elements(By.CSS_SELECTOR, "#hits .member"):
            raise SystemExit("the demo Search returned no window hit: change QUERY or the demo memory")
        driver.execute_script("document.activeElement.blur(); window.scrollTo(0, 0)")
        out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out))
    finally:
        driver.quit()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "inspector.png")
    parser.add_argument("--width", type=int, default=1200)
    parser.add_argument("--height", type=int, default=1100)
    parser.add_argument("--timezone", default="UTC", help="an IANA name, e.g. Europe/Lisbon")
    args = parser.parse_args(argv)
    browser = find_browser()
    if browser is None:
        print("no chromium and chromedriver found (Debian: apt-get install chromium chromium-driver)",
              file=sys.stderr)
        return 1
    try:
        import selenium  # noqa: F401
    except ImportError:
        print("selenium is missing: python3 -m pip install selenium", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as directory:
        app = App(load({"db_path": str(Path(directory) / "demo.db"), "port": 0, "host": "127.0.0.1",
                        "api_key": KEY}, environ={})).start()
        try:
            seed(app)
            shoot(app.url, args.out, args.width, args.height, browser, args.timezone)
        finally:
            app.stop()
    print(f"wrote {args.out} ({args.width} x {args.height})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
