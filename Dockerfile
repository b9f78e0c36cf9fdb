# The in-cluster agent (python -m agent). Build: docker build -t node-manager-agent:0.1.0 .
# Base pinned to an exact patch release of the Python the tests run on (tests/unit/agent/test_dockerfile.py checks
# it against the test interpreter and requirements.txt).
FROM python:3.11.7-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
# The same pins as the tests: requirements.txt as it is, nothing else installed.
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

COPY core/ ./core/
COPY adapters/ ./adapters/
COPY agent/ ./agent/

# Non-root (the Deployment's runAsUser); the root filesystem is read-only in the pod, /tmp is an emptyDir.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["python", "-m", "agent"]
