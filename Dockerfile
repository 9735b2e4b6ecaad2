# One image for every Gradeq service; SERVICE (intake|worker|notification|analytics)
# picks the app at run time. BASE_IMAGE needs python3 with the venv module. The default
# is pinned by digest (the multi-platform index of python:3.12-slim, Python 3.12.13 on
# Debian trixie, as docker-library/repo-info lists it): a build gets the same base until
# the digest is updated on purpose.
ARG BASE_IMAGE=python:3.12-slim@sha256:229a2c5bfa27522db7815ea81f9bed70af17ccb9de9fc7ad142b1877b5830d36

FROM ${BASE_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv /opt/venv
WORKDIR /src

# Dependencies first, at the versions the tests ran on (services/constraints.txt): this
# layer is rebuilt only when pyproject.toml or the constraints change.
COPY pyproject.toml ./
COPY services/constraints.txt ./constraints.txt
RUN /opt/venv/bin/python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
 && /opt/venv/bin/pip install -c constraints.txt -r /tmp/requirements.txt

COPY shared ./shared
COPY services ./services
RUN /opt/venv/bin/pip install --no-deps . \
 && /opt/venv/bin/python -c "import shared, services"

FROM ${BASE_IMAGE} AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PORT=8080 \
    SERVICE=intake
RUN groupadd --system --gid 10001 gradeq \
 && useradd --system --uid 10001 --gid gradeq --home-dir /home/gradeq --create-home --shell /usr/sbin/nologin gradeq
COPY --from=build /opt/venv /opt/venv
COPY scripts/container-entrypoint.sh /usr/local/bin/gradeq-serve
USER 10001:10001
WORKDIR /home/gradeq
EXPOSE 8080
ENTRYPOINT ["/bin/sh", "/usr/local/bin/gradeq-serve"]
