# The dashboard's two permissions, on a model without a table (managed=False).

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Dashboard",
            fields=[
                ("id", models.AutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
            ],
            options={
                "verbose_name": "job dashboard",
                "verbose_name_plural": "job dashboard",
                "permissions": [
                    ("view_dashboard", "Can view the djwork dashboard"),
                    ("manage_dashboard", "Can act on jobs, queues and processes in the djwork dashboard"),
                ],
                "managed": False,
                "default_permissions": (),
            },
        ),
    ]
