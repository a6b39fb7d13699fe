"""``manage.py djwork_mark_deploy [label]``: mark a deploy on the Metrics charts (docs/metrics.md)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from djwork.api.metrics import default_label, mark_deploy


class Command(BaseCommand):
    help = "Mark a deploy (Sidekiq's YYYYMMDD-marks); the label defaults to the last git commit's sha and subject."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("label", nargs="?", default=None, help="text shown on the charts")

    def handle(self, *args: Any, **options: Any) -> None:
        label = options["label"] or default_label()
        if mark_deploy(label):
            self.stdout.write(f"marked deploy: {label}")
        else:
            self.stdout.write(f"already marked this minute: {label}")
