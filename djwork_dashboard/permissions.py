"""Who may look and who may act. Managing implies viewing (acting on what you can't see makes no sense)."""

from __future__ import annotations

from typing import Any

VIEW = "djwork_dashboard.view_dashboard"
MANAGE = "djwork_dashboard.manage_dashboard"


def can_view(user: Any) -> bool:
    return bool(user.is_active and user.is_staff and (user.has_perm(VIEW) or user.has_perm(MANAGE)))


def can_manage(user: Any) -> bool:
    return bool(user.is_active and user.is_staff and user.has_perm(MANAGE))
