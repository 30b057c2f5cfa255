# The portal image: the web process (gunicorn), the Celery workers and beat all run from it
# with different commands (compose.yaml). Settings come from the environment, secrets from
# files (*_FILE, compose secrets); nothing secret is baked in.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    DJANGO_SETTINGS_MODULE=portal.settings.prod \
    PLATTER_STATE_DIR=/var/lib/platter \
    STATIC_ROOT=/var/lib/platter-static

# docker's ssh:// transport runs the system ssh client; python-ldap (LDAP sign-in) links
# libldap and libsasl2.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openssh-client libldap-2.5-0 libsasl2-2 \
    && rm -rf /var/lib/apt/lists/*

# A user of its own; its home holds the state: the portal CA (pki/) and ~/.ssh for ssh:// nodes.
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/platter --create-home platter \
    && chmod 0700 /var/lib/platter \
    && install -d -o platter -g platter /var/lib/platter-static

WORKDIR /app
# Dependencies first, so a code change does not reinstall them.
COPY pyproject.toml ./
# python-ldap has no wheel: it builds here, and the compiler and headers go again.
RUN mkdir portal apps workers \
    && apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev libldap2-dev libsasl2-dev \
    && pip install --no-compile . \
    && pip uninstall -y platter \
    && apt-get purge -y --auto-remove gcc libc6-dev libldap2-dev libsasl2-dev \
    && rm -rf /var/lib/apt/lists/*
COPY manage.py ./
COPY portal portal
COPY apps apps
COPY workers workers
COPY templates templates
COPY static static
COPY fixtures fixtures
COPY deploy/gunicorn.conf.py deploy/gunicorn.conf.py
# The code runs from /app (templates, static and fixtures are found next to it).
RUN pip install --no-deps --no-compile -e .

USER platter
EXPOSE 8000
CMD ["gunicorn", "-c", "deploy/gunicorn.conf.py"]
