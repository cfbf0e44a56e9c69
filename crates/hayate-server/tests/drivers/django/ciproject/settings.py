"""Settings of the Django-on-Hayate CI check.

The database comes from the environment: HAYATE_HOST, HAYATE_PORT, HAYATE_DB
(user postgres, no password).  Nothing here writes files (no logging handlers,
no file-based caches/sessions); SECRET_KEY is a hardcoded dummy.
"""
import os

_missing = [v for v in ("HAYATE_HOST", "HAYATE_PORT", "HAYATE_DB") if not os.environ.get(v)]
if _missing:
    raise RuntimeError("environment variable(s) not set: %s" % ", ".join(_missing))

SECRET_KEY = "django-ci-dummy-secret-key-not-used-for-anything"
DEBUG = False
ALLOWED_HOSTS = ["localhost"]

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "catalog",
]
MIDDLEWARE = []
ROOT_URLCONF = "ciproject.urls"
TEMPLATES = []

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "HOST": os.environ["HAYATE_HOST"],
        "PORT": os.environ["HAYATE_PORT"],
        "NAME": os.environ["HAYATE_DB"],
        "USER": "postgres",
        "PASSWORD": "",
        "CONN_MAX_AGE": 0,
        "OPTIONS": {"connect_timeout": 10},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

USE_TZ = True
TIME_ZONE = "UTC"
USE_I18N = False

# Fast hashing: create_user()/authenticate() must not dominate the run time.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
