#!/usr/bin/env bash
# A real `mlflow server` for tests/backends/test_mlflow_traces.py, in its own environment (idempotent; a warm run
# only checks the installed version and its OTLP route): the project's env has mlflow-skinny, which has no server
# and no SQLAlchemy.
# It goes to ${OTEL_VERL_CACHE:-$HOME/.cache/otel_verl}/mlflow (a uv venv), at the version of the project's
# mlflow-skinny (client and server agree), and is checked to take OTLP traces (mlflow >= 3.6: /v1/traces).
# Usage: scripts/install_mlflow.sh        (CI: cache that folder)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${OTEL_VERL_CACHE:-$HOME/.cache/otel_verl}"
ENV="$CACHE/mlflow"
start=$SECONDS
VERSION="${OTEL_VERL_MLFLOW_VERSION:-$(cd "$ROOT" && uv run --frozen python -c 'from importlib.metadata import version; print(version("mlflow-skinny"))')}"
installed="$("$ENV/bin/python" -c 'from importlib.metadata import version; print(version("mlflow"))' 2>/dev/null || true)"
if [[ "$installed" != "$VERSION" ]]; then
    echo "install_mlflow: mlflow $VERSION into $ENV"
    uv venv -q --python 3.11 "$ENV"
    uv pip install -q --python "$ENV/bin/python" "mlflow==$VERSION"
fi
# OTLP ingest: the server's /v1/traces route (mlflow >= 3.6)
"$ENV/bin/python" -c "import mlflow.server.otel_api as api; assert any(r.path == \"/v1/traces\" for r in api.otel_router.routes)" || {
    echo "install_mlflow: mlflow $VERSION at $ENV has no OTLP trace ingest (/v1/traces); need mlflow >= 3.6" >&2
    exit 1
}
echo "install_mlflow: done in $((SECONDS - start)) s: mlflow $VERSION at $ENV"
