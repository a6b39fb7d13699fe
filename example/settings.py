"""Settings of the example project: SQLite, Redis from $REDIS_URL, the djwork apps and Tasks backend."""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "djwork-example-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "djwork",
    "djwork_dashboard",
    "example",
]
try:  # Django < 6: the backport provides django.tasks' API as django_tasks
    import django.tasks  # noqa: F401
except ImportError:
    INSTALLED_APPS.append("django_tasks")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example.urls"
WSGI_APPLICATION = "example.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_PATH = Path(os.environ.get("DJWORK_EXAMPLE_DB", BASE_DIR / ".djwork" / "example.sqlite3"))
# SQLite creates the file but not its folder: in a fresh checkout `manage.py migrate`
# failed with "unable to open database file" until ./dev had made .djwork/.
DATABASE_PATH.parent.mkdir(parents=True, exist_ok=True)
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(DATABASE_PATH)}}

USE_TZ = True
TIME_ZONE = "UTC"
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "/admin/login/"

REDIS_URL = os.environ.get("REDIS_URL", "redis://localhost:6379/0")

DJWORK = {
    "REDIS_URL": REDIS_URL,
    "CONCURRENCY": 10,
    "QUEUES": ["critical", "default", "low"],
    "TIMEOUT": 25,
}

TASKS = {"default": {"BACKEND": "djwork.tasks_backend.DjworkBackend", "QUEUES": ["default", "low"]}}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {"djwork": {"handlers": ["console"], "level": os.environ.get("DJWORK_LOG_LEVEL", "INFO")}},
}
