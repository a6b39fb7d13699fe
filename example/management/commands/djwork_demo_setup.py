"""Create the demo login and enqueue a few example jobs (used by ./dev demo)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from example import tasks


class Command(BaseCommand):
    help = "Create a demo/demo staff login and enqueue example jobs."

    def handle(self, *args, **options):
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username="demo", defaults={"is_staff": True, "is_superuser": True})
        if created:
            user.set_password("demo")
            user.save()
        for number in range(20):
            tasks.add.delay(number, number)
        tasks.greet.delay(name="djwork")
        tasks.sleep_for.delay(5)
        tasks.fail.delay("a demo failure")
        tasks.add.perform_in(30, 1, 2)
        tasks.multiply.enqueue(6, 7)
        self.stdout.write("demo: enqueued example jobs; login demo / demo")
