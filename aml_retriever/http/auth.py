"""Who may call: the API key a request offers, and which hosts count as this machine."""

from __future__ import annotations

import hmac
import ipaddress
from email.message import Message

from aml_retriever.common.errors import Unauthorized


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
