"""The inspector page at /ui/: three static files (aml_retriever/http/ui/) shipped in the package;
and the API's OpenAPI document at /openapi.json (aml_retriever/http/openapi.json), so that an
installed server describes itself (a pip user has no docs/).

Neither holds data, so they are served without the API key; everything the page shows it
fetches with the key the person types. Only the files named in FILES can be answered: the request path is
looked up in that table and never joined to a directory, so no path reaches another file.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources
from urllib.parse import urlsplit

from aml_retriever.common.errors import MethodNotAllowed, NotFound

PREFIX = "/ui"
LABEL = "/ui/"  # what the access log shows for every file of the page
# The file after /ui/ -> (file in aml_retriever/http/ui/, content type).
FILES = {
    "": ("index.html", "text/html; charset=utf-8"),
    "index.html": ("index.html", "text/html; charset=utf-8"),
    "app.css": ("app.css", "text/css; charset=utf-8"),
    "app.js": ("app.js", "text/javascript; charset=utf-8"),
}
# The page's own script and style only: no inline script, no handler attribute, no other origin.
# Even text from the store turned into markup by mistake could then run nothing.
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; "
                           "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                           "form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",  # frame-ancestors, for browsers that predate it
}
# A browser asks again each time (the files change with the version) and gets a 304 while its
# copy's ETag still matches: a few hundred bytes instead of the page.
CACHE_CONTROL = "no-cache"


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str | None
    body: bytes
    headers: dict[str, str]


OPENAPI = "/openapi.json"


def label(raw_path: str) -> str:
    """What the access log and the metrics call a request answered here."""
    return OPENAPI if urlsplit(raw_path).path == OPENAPI else LABEL


def serves(raw_path: str) -> bool:
    """Whether a request path is the page's or the OpenAPI document's (then it is answered
    here, without the key): the site's root leads to the page, as a browser pointed at the
    server expects."""
    path = urlsplit(raw_path).path
    return path in ("/", PREFIX, OPENAPI) or path.startswith(PREFIX + "/")


def answer(raw_path: str, method: str, if_none_match: str | None) -> Answer:
    """The answer to a GET of one of the page's files; 404 for any other path under /ui/."""
    if method != "GET":
        raise MethodNotAllowed(f"{label(raw_path)} accepts GET", ("GET",))
    path = urlsplit(raw_path).path
    if path == OPENAPI:
        return _file(resources.files("aml_retriever.http").joinpath("openapi.json").read_bytes(),
                     "application/json; charset=utf-8", if_none_match)
    if path == "/":  # a redirect that may change (the root could serve more one day): not 301
        return Answer(302, None, b"", {"Location": PREFIX + "/", "Cache-Control": CACHE_CONTROL})
    if path == PREFIX:
        return Answer(301, None, b"", {"Location": PREFIX + "/", "Cache-Control": CACHE_CONTROL})
    if path[len(PREFIX) + 1:] not in FILES:
        raise NotFound("no such file of the inspector page; it is served at /ui/")
    name, content_type = FILES[path[len(PREFIX) + 1:]]
    return _file(read(name), content_type, if_none_match)


def _file(body: bytes, content_type: str, if_none_match: str | None) -> Answer:
    """A file of the package, with its ETag (a 304 when the browser's copy still matches)."""
    tag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
    headers = {**SECURITY_HEADERS, "Cache-Control": CACHE_CONTROL, "ETag": tag}
    if if_none_match is not None and tag in (t.strip() for t in if_none_match.split(",")):
        return Answer(304, None, b"", headers)
    return Answer(200, content_type, body, headers)


def read(name: str) -> bytes:
    """One file of the page, from the installed package."""
    return resources.files("aml_retriever.http").joinpath("ui", name).read_bytes()
