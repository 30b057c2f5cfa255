import os

from django.core.wsgi import get_wsgi_application

from portal.drain import BodyDrained

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.dev")
# gunicorn's gthread workers need every request body read to its end (portal/drain.py).
application = BodyDrained(get_wsgi_application())
