"""Celery's message properties as call options (``apply_async(app_id="billing")``), read back as
``self.request.properties``.

Celery hands every calling option it doesn't know itself to the broker as an AMQP basic property of the
message, and its worker gives them to the task as ``request.properties``. djwork has no broker message: the
properties a call gives ride in the payload's ``properties`` field (one dict; Sidekiq ignores extra fields,
so a Ruby client reads the job as before). Only AMQP's basic properties a caller may set are accepted: an
unknown option is still refused (a misspelt ``routing_key`` must not vanish into a dict). docs/celery.md.
"""

from __future__ import annotations

from typing import Any

from djwork.options import OptionError

PAYLOAD_FIELD = "properties"

# AMQP basic properties taken as free text: what the caller says about the message.
TEXT_PROPERTIES = ("app_id", "user_id", "correlation_id", "reply_to", "message_id", "type", "cluster_id")
# Properties whose only meaningful values in djwork are fixed: the payload is always JSON text in Redis.
FIXED_PROPERTIES = {
    "content_type": ("application/json",),
    "content_encoding": ("utf-8",),
    # AMQP's 1 (transient) and 2 (persistent), or kombu's names for them: Redis keeps either alike.
    "delivery_mode": (1, 2, "transient", "persistent"),
}
NAMES = (*TEXT_PROPERTIES, *FIXED_PROPERTIES)


def take(options: dict[str, Any], where: str) -> dict[str, Any]:
    """Pop the message properties out of a call's ``options``: the payload fields they add (none if none)."""
    given = {name: options.pop(name) for name in NAMES if name in options}
    given = {name: value for name, value in given.items() if value is not None}
    for name, value in given.items():
        if name in FIXED_PROPERTIES:
            allowed = FIXED_PROPERTIES[name]
            if isinstance(value, bool) or value not in allowed:
                raise OptionError(f"{where}: {name}={value!r} is not supported: djwork's payload is JSON in "
                                  f"Redis, so {name} may only be one of {list(allowed)}")
        elif not isinstance(value, str):
            raise OptionError(f"{where}: the message property {name} must be a string, got {value!r}")
    return {PAYLOAD_FIELD: given} if given else {}


def of_payload(payload: dict[str, Any], jid: str | None) -> dict[str, Any]:
    """``request.properties``: the call's, with Celery's ``correlation_id`` (the job's id unless the call set
    one) and the call's ``priority`` when it gave one."""
    stored = payload.get(PAYLOAD_FIELD)
    properties: dict[str, Any] = {"correlation_id": jid} if jid is not None else {}
    if isinstance(stored, dict):
        properties.update(stored)
    priority = payload.get("priority")
    if isinstance(priority, int) and not isinstance(priority, bool):
        properties["priority"] = priority
    return properties
