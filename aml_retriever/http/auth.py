"""Who may call: the API key a request offers, where a browser says a request comes from, and
which host names count as this machine."""

from __future__ import annotations

import hmac
import ipaddress
import re
from email.message import Message
from urllib.parse import urlsplit

from aml_retriever.common.errors import Forbidden, Unauthorized

# Methods that change a memory. A web page can make a browser send a form POST anywhere, with
# the browser's own headers: such a request is refused unless the browser says it comes from this
# server's own origin (the inspector page) or is no browser's (no such headers at all).
STATE_CHANGING = frozenset({"POST", "DELETE", "PUT", "PATCH"})
SAME_SITE_VALUES = frozenset({"same-origin", "none"})  # Sec-Fetch-Site of this origin, or typed


def authenticate(headers: Message, key: str | None) -> None:
    """Refuse a request without the key (X-Api-Key, or Authorization: Bearer/Token); no key
    configured lets every request in."""
    if not key:
        return
    offered = headers.get("X-Api-Key")
    authorization = headers.get("Authorization", "")
    scheme, _, credential = authorization.strip().partition(" ")
    if offered is None and scheme.lower() in ("bearer", "token"):
        offered = credential.strip()
    # http.server decodes header bytes as Latin-1; encoding back gives the bytes as sent,
    # so a key with non-ASCII characters, sent as UTF-8, compares equal.
    if offered is None or not hmac.compare_digest(offered.encode("latin-1", "replace"),
                                                  key.encode("utf-8")):
        raise Unauthorized("missing or invalid API key")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refuse_cross_site(method: str, headers: Message) -> None:
    """Refuse a state change that a browser says another site's page sent: by Sec-Fetch-Site,
    or by an Origin that is not the Host the request was sent to."""
    if method not in STATE_CHANGING:
        return
    site = headers.get("Sec-Fetch-Site")
    if site is not None:  # the browser's own word, right behind a proxy that rewrites Host too
        if site.strip().lower() not in SAME_SITE_VALUES:
            raise Forbidden("a change sent by another site's page is refused", "Origin")
        return
    origin = headers.get("Origin")  # a browser too old to say Sec-Fetch-Site
    if origin is not None and not _same_origin(origin, headers.get("Host") or ""):
        raise Forbidden("a change sent by another site's page is refused", "Origin")


def refuse_foreign_host(headers: Message) -> None:
    """For a server without a key that listens on loopback only: refuse a Host naming another
    machine. A web page whose name an attacker points at 127.0.0.1 (DNS rebinding) would
    otherwise read and change the memory as a same-origin page; every name of this machine is
    still accepted, and so is a request without a Host. Exactly: one Host, a name of this
    machine and at most a port (`evil.com@127.0.0.1` was read as 127.0.0.1, and of two Host
    headers the first was taken)."""
    hosts = headers.get_all("Host") or []
    if not hosts:
        return
    found = _LOOPBACK_HOST.fullmatch(hosts[0].strip()) if len(hosts) == 1 else None
    if found is None or not is_loopback(found.group("name").strip("[]").lower()):
        raise Forbidden("this server answers only to a name of this machine (localhost, "
                        "127.0.0.1, [::1]); set an API key to serve other names", "Host")


# A Host that names this machine, and nothing else: the name, then at most a port.
_LOOPBACK_HOST = re.compile(r"(?P<name>localhost|127(?:\.[0-9]{1,3}){3}|\[::1\])(?::[0-9]{1,5})?",
                            re.IGNORECASE)


def _same_origin(origin: str, host: str) -> bool:
    """Whether an Origin names the host the request was sent to: the same name, and the same
    port, a default one (80, 443) standing for a Host that names none."""
    try:
        sent, to = urlsplit(origin.strip()), urlsplit(f"//{host.strip()}")
        if sent.scheme not in ("http", "https") or not sent.hostname or not to.hostname:
            return False
        port = sent.port or (443 if sent.scheme == "https" else 80)
        return sent.hostname == to.hostname and (to.port or port) == port
    except ValueError:
        return False
