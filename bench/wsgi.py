"""WSGI entry of bench/embedded_gunicorn.py (bench.settings, bench.urls)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
application = get_wsgi_application()
