"""The inspector page's files are served at /ui/ without the key and with a strict policy; nothing
else is: no other path under /ui/, no way out of the page's folder, no API answer without the key.
The page itself is driven in a browser by test_inspector_browser.py."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Client, start_app

from aml_retriever.http import inspector

ROOT = Path(__file__).resolve().parent.parent
UI = ROOT / "aml_retriever" / "http" / "ui"
KEY = "inspector-key"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    app = start_app(tmp_path_factory.mktemp("inspector"), api_key=KEY)
    Client(app.port, api_key=KEY).add("user-1", "r1", ["The launch moved to August."])
    yield app
    app.stop()


class Page:
    """A keep-alive client that keeps answers as bytes (the page's files are not JSON)."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        self.conn.request("GET", path, headers=headers or {})
        response = self.conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


@pytest.fixture(scope="module")
def page(server):
    client = Page(server.port)
    yield client
    client.conn.close()


def test_the_page_is_served_without_the_key_with_a_strict_policy(page, http):
    status, headers, body = page.get("/ui/")
    assert status == 200
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert headers["content-security-policy"] == (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["cache-control"] == "no-cache"
    assert body == (UI / "index.html").read_bytes()
    assert http.request("GET", "/stats").status == 401  # control: the API still wants the key


@pytest.mark.parametrize("name,content_type", [
    ("app.js", "text/javascript; charset=utf-8"), ("app.css", "text/css; charset=utf-8"),
    ("index.html", "text/html; charset=utf-8"),
])
def test_each_file_has_its_content_type(page, name, content_type):
    status, headers, body = page.get(f"/ui/{name}")
    assert (status, headers["content-type"]) == (200, content_type)
    assert body == (UI / name).read_bytes()
    assert "content-security-policy" in headers and headers["x-content-type-options"] == "nosniff"


def test_every_file_the_page_names_is_served(page):
    html = (UI / "index.html").read_text()
    named = re.findall(r'(?:src|href)="([^"]+)"', html)
    local = [n for n in named if not n.startswith("data:")]
    assert sorted(local) == ["app.css", "app.js"]
    for name in local:
        assert page.get(f"/ui/{name}")[0] == 200, name


def test_ui_without_the_slash_redirects_to_the_page(http):
    response = http.request("GET", "/ui")
    assert (response.status, response.headers["location"]) == (301, "/ui/")
    assert http.request("GET", "/ui?x=1").headers["location"] == "/ui/"


def test_the_root_leads_to_the_page(http):
    """A browser pointed at the server finds the inspector (`GET /` was a JSON 404 pointing at
    docs/, which a pip user has none of); no key is asked, no data is in the answer. The control:
    a path that is no page stays a 404."""
    response = http.request("GET", "/")
    assert (response.status, response.headers["location"], response.raw) == (302, "/ui/", b"")
    assert "location" not in http.request("GET", "/nothing-here").headers  # 401 (a key server)
    assert http.request("POST", "/", body={}).status == 405


def test_the_log_names_the_inspector(tmp_path, caplog):
    import logging

    from conftest import start_app
    with caplog.at_level(logging.INFO, logger="aml_retriever"):
        app = start_app(tmp_path)
        try:
            assert f"the inspector page: {app.url}/ui/" in caplog.text
        finally:
            app.stop()


@pytest.mark.parametrize("path", [
    "/ui/nope.js", "/ui/app.js/", "/ui/APP.JS", "/ui/ui/index.html", "/ui/../stats",
    "/ui/%2e%2e/stats", "/ui/../aml_retriever/server.py", "/ui/..%2finspector.py",
    "/ui/%2e%2e%2finspector.py", "/ui/..%5cinspector.py", "/ui//etc/passwd", "/ui/./app.js",
    "/ui/%2fetc%2fpasswd", "/ui/..", "/ui/app.js%00.html", "/ui/app%2ejs/../app.js",
])
def test_no_other_path_under_ui_is_answered(http, path):
    response = http.request("GET", path)
    assert response.status == 404, path
    assert response.body["error"]["code"] == "not_found"
    assert b"import" not in response.raw and b"root:" not in response.raw
    assert "content-security-policy" not in response.headers


def test_the_page_does_not_open_the_api_to_a_caller_without_the_key(http):
    for path in ("/ui/../users", "/ui/../stats", "/ui/%2e%2e/users/user-1/audit"):
        assert http.request("GET", path).status == 404
    assert http.request("GET", "/users/user-1/audit").status == 401  # control
    keyed = Client(http.port, api_key=KEY)
    assert keyed.request("GET", "/users/user-1/audit").body["events"]  # populated control
    keyed.close()


def test_the_page_is_read_only(http):
    for method in ("POST", "DELETE", "PUT", "HEAD"):
        response = http.request(method, "/ui/", raw=b"" if method != "HEAD" else None)
        assert (response.status, response.headers.get("allow")) == (405, "GET"), method


def test_an_unchanged_file_answers_304_and_the_connection_goes_on(page):
    _, headers, body = page.get("/ui/app.js")
    tag = headers["etag"]
    status, again, rest = page.get("/ui/app.js", {"If-None-Match": f'"other", {tag}'})
    assert (status, rest, again["etag"]) == (304, b"", tag)
    assert "content-length" not in again and "connection" not in again
    assert page.get("/ui/app.js", {"If-None-Match": '"other"'})[::2] == (200, body)
    assert page.get("/ui/")[0] == 200  # same connection, still in step


def test_the_page_uses_no_inline_script_style_or_markup_from_strings():
    html = (UI / "index.html").read_text()
    assert re.findall(r"<script[^>]*>", html) == ['<script src="app.js" defer>']
    assert not re.search(r"\son[a-z]+=|\sstyle=|<style", html)
    script = (UI / "app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                 "new Function", "setAttribute(\"on", "http://", "https://"):
        assert sink not in script, sink


def test_only_the_tables_files_can_be_read_and_they_are_documented():
    assert set(inspector.FILES) == {"", "index.html", "app.css", "app.js"}
    assert {p.name for p in UI.iterdir()} == {name for name, _ in inspector.FILES.values()}
    spec = json.loads((ROOT / "aml_retriever" / "http" / "openapi.json").read_text())
    file = next(p for p in spec["paths"]["/ui/{file}"]["get"]["parameters"] if p.get("name") == "file")
    files = file["schema"]["enum"]
    assert sorted(files) == sorted(name for name in inspector.FILES if name)
    policy = spec["paths"]["/ui/"]["get"]["responses"]["200"]["headers"]["Content-Security-Policy"]
    assert policy["description"] == inspector.CONTENT_SECURITY_POLICY


@pytest.mark.slow
def test_the_page_ships_in_the_installed_package(tmp_path):
    """`pip install` of the project carries the page's files, and the server reads them there."""
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", "*.egg-info", "build", "eval_out", "bench_out", "*.db*", "fixtures",
        "bench", "tests", "docs"))
    target = tmp_path / "target"
    built = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                            "--target", str(target), str(source)],
                           capture_output=True, text=True, timeout=300)
    if built.returncode != 0:
        pytest.skip("pip could not build the package here (offline, no setuptools wheel?): "
                    + (built.stderr.strip().splitlines() or ["no output"])[-1])
    assert sorted(p.name for p in (target / "aml_retriever" / "http" / "ui").iterdir()) == [
        "app.css", "app.js", "index.html"]
    check = ("from aml_retriever.http import inspector; import sys; "
             "a = inspector.answer('/ui/', 'GET', None); "
             "sys.stdout.write(inspector.__file__ + ' ' + str(len(a.body)))")
    ran = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(target)})
    where, size = ran.stdout.split()
    assert where.startswith(str(target)) and int(size) == (UI / "index.html").stat().st_size


def test_the_server_serves_its_own_openapi_document(http):
    """An installed server describes itself (a pip user has no docs/): the document shipped in
    the package, without the key, as JSON, cached by ETag; the control, a POST, is refused."""
    response = http.request("GET", "/openapi.json")
    assert response.status == 200 and response.headers["content-type"].startswith("application/json")
    assert response.body["openapi"].startswith("3.1") and "/search" in response.body["paths"]
    assert response.raw == (ROOT / "aml_retriever" / "http" / "openapi.json").read_bytes()
    again = http.request("GET", "/openapi.json", headers={"If-None-Match": response.headers["etag"]})
    assert again.status == 304
    assert http.request("POST", "/openapi.json", body={}).status == 405
