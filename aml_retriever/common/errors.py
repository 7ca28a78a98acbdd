"""The exception hierarchy of the service, and the one function that shapes every error body.

Each error carries its HTTP status and a stable machine-readable code. Messages name the field
and the rule that failed; they never quote the caller's content back.
"""

from __future__ import annotations

from typing import Any


class AmlError(Exception):
    """Base of every error the service reports to a caller."""

    status = 500
    code = "internal_error"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidField(AmlError):
    status = 400
    code = "invalid_field"


class InvalidBody(AmlError):
    status = 400
    code = "invalid_body"


class BadRequest(AmlError):
    """The HTTP framing itself is malformed (request line, headers, Content-Length)."""

    status = 400
    code = "bad_request"


class Unauthorized(AmlError):
    status = 401
    code = "unauthorized"


class Forbidden(AmlError):
    """A request the key does not decide: a state change sent by another site's page, or a
    request to a keyless loopback server under a name that is not this machine's."""

    status = 403
    code = "forbidden"


class NotFound(AmlError):
    status = 404
    code = "not_found"


class UnknownUser(NotFound):
    """A read of one user's memory (its messages, sessions, speakers, audit, export) naming a
    user the store holds no file of: never added, or deleted. An empty answer would read as an
    empty memory, and a misspelt id would pass for one."""

    code = "unknown_user"


class MethodNotAllowed(AmlError):
    status = 405
    code = "method_not_allowed"

    def __init__(self, message: str, allowed: tuple[str, ...]) -> None:
        super().__init__(message)
        self.allowed = allowed


class RequestTimeout(AmlError):
    status = 408
    code = "request_timeout"


class IdempotencyConflict(AmlError):
    status = 409
    code = "idempotency_conflict"


class LengthRequired(AmlError):
    status = 411
    code = "length_required"


class PayloadTooLarge(AmlError):
    status = 413
    code = "payload_too_large"


class UnsupportedMediaType(AmlError):
    status = 415
    code = "unsupported_media_type"


class Overloaded(AmlError):
    """Too much at once: try again after Retry-After (429 is the status clients honour by
    waiting; a leaderboard's fails a Search answered 503)."""

    status = 429
    code = "overloaded"


class ErasurePending(AmlError):
    """A deletion (or a forget) is committed, but its text could not yet be cleared from the
    user file's write-ahead log: another process held the file's checkpoint for the whole busy
    timeout. Sent again, the request answers once the text is gone."""

    status = 503
    code = "erasure_pending"


class UserStoreDamaged(AmlError):
    """The user's file is damaged (not a database, or malformed): it was moved aside, and the
    user is refused until it is restored or the user is deleted. Other users are unaffected."""

    status = 503
    code = "user_store_damaged"


class StorageFull(AmlError):
    """The store could not write: the disk is full, or a file reached the size limit."""

    status = 507
    code = "storage_full"


class StoreError(AmlError):
    """The database cannot be used as it is (wrong version, not a store, locked by a server)."""

    status = 500
    code = "store_unavailable"


class ClusterError(AmlError):
    """The cluster tools could not do what was asked: the router (HAProxy) is missing or refused
    a command, a shard did not start, or a move of users stopped (cluster.py, mover.py)."""

    status = 500
    code = "cluster_error"


def error_body(error: AmlError) -> dict[str, Any]:
    """The JSON shape of every error answer: {"error": {"code", "message", "field"}}."""
    return {"error": {"code": error.code, "message": error.message, "field": error.field}}


def internal_error_body() -> dict[str, Any]:
    """What a caller sees of an unexpected failure: no detail, no trace, no content."""
    return error_body(AmlError("internal error"))
