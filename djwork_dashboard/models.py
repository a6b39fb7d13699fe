"""The dashboard's permissions, on a model with no table (nothing is stored in the database).

``view_dashboard`` lets staff look; ``manage_dashboard`` lets them act
(retry, delete, kill, pause, quiet, stop). Superusers have both.
"""

from django.db import models


class Dashboard(models.Model):
    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("view_dashboard", "Can view the djwork dashboard"),
            ("manage_dashboard", "Can act on jobs, queues and processes in the djwork dashboard"),
        ]
        verbose_name = "job dashboard"
        verbose_name_plural = "job dashboard"
