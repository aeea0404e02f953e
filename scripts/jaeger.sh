#!/usr/bin/env bash
# See traces in Jaeger without Docker: the collector (otelcol-verl) and Jaeger v2 this project builds
# (scripts/build_collector.sh, scripts/build_jaeger.sh; cached in ${OTEL_VERL_CACHE:-~/.cache/otel_verl}/bin),
# started in the background with the repository's collector/config.yaml and jaeger/config.yaml.
#
#   bash scripts/jaeger.sh up       # start both, wait until they answer, print the URLs and the replay command
#   bash scripts/jaeger.sh status   # what runs (pid, ports, whether Jaeger serves its web UI)
#   bash scripts/jaeger.sh down     # stop both (SIGTERM, then SIGKILL after 15 s), remove their pid files
#
# OTLP in: 127.0.0.1:4317 (gRPC) / :4318 (HTTP), as the compose stack; Jaeger's UI and API: :16686. Every port and
# the bind address are the configs' own variables (docs/backends.md): OTEL_VERL_OTLP_GRPC_PORT,
# JAEGER_QUERY_HTTP_PORT, OTEL_VERL_COLLECTOR_BIND, … Pid files and logs: $OTEL_VERL_BACKENDS_DIR
# (default <cache>/run); the collector's file archive: $OTEL_VERL_ARCHIVE_DIR (default <that dir>/archive).
# Jaeger's web UI: a Go-built Jaeger has none of its own (docs/without-docker.md, "The Jaeger UI without Docker");
# set JAEGER_UI_ASSETS_PATH to a built jaeger-ui, or put one in <cache>/jaeger-ui. Without it the API still works.
# Missing binaries are built first when Go is installed (minutes, once).
# The collector runs with collector/jaeger_only.yaml over config.yaml: Jaeger is its only trace backend (no Tempo
# here; exporting to an absent one filled its log with connection-refused warnings). Jaeger keeps spans in memory:
# when `up` starts it, the replay hint it prints carries --ignore-journal (the spool's delivery journal remembers
# spans sent to the Jaeger before, whose store went with it; without the flag the replay sent nothing: issue 51).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${OTEL_VERL_CACHE:-$HOME/.cache/otel_verl}"
BIN="$CACHE/bin"
RUN="${OTEL_VERL_BACKENDS_DIR:-$CACHE/run}"
GRPC="${OTEL_VERL_OTLP_GRPC_PORT:-4317}"
HTTP="${OTEL_VERL_OTLP_HTTP_PORT:-4318}"
HEALTH="${OTEL_VERL_HEALTH_PORT:-13133}"
QUERY="${JAEGER_QUERY_HTTP_PORT:-16686}"
export OTEL_VERL_JAEGER_OTLP_ENDPOINT="${OTEL_VERL_JAEGER_OTLP_ENDPOINT:-127.0.0.1:${JAEGER_OTLP_GRPC_PORT:-14317}}"
export OTEL_VERL_ARCHIVE_DIR="${OTEL_VERL_ARCHIVE_DIR:-$RUN/archive}"
if [[ -z "${JAEGER_UI_ASSETS_PATH:-}" && -f "$CACHE/jaeger-ui/index.html" ]]; then
    export JAEGER_UI_ASSETS_PATH="$CACHE/jaeger-ui"
fi
NAMES=(collector jaeger)

say() { echo "jaeger.sh: $*"; }

binary() {  # binary NAME: the executable of collector|jaeger
    if [[ "$1" == collector ]]; then echo "$BIN/otelcol-verl"; else echo "$BIN/jaeger"; fi
}

ui_of() {  # ui_of PID: the JAEGER_UI_ASSETS_PATH the running Jaeger was started with (empty: API only)
    local value
    value="$(tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | sed -n 's/^JAEGER_UI_ASSETS_PATH=//p')" || true
    if [[ -n "$value" && -f "$value/index.html" ]]; then echo "$value"; fi
}

running_pid() {  # running_pid NAME: its pid when its pid file names a live process of that binary
    local pid
    pid="$(cat "$RUN/$1.pid" 2>/dev/null)" || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$(basename "$(binary "$1")")" || return 1
    echo "$pid"
}

http_ok() {  # http_ok PORT PATH: 200 from http://127.0.0.1:PORT/PATH
    if command -v curl >/dev/null 2>&1; then
        curl -fs -o /dev/null --max-time 2 "http://127.0.0.1:$1$2"
        return
    fi
    local line=""
    exec 3<>"/dev/tcp/127.0.0.1/$1" || return 1
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$2" >&3
    IFS= read -r -t 2 line <&3 || true
    exec 3<&- 3>&-
    [[ "$line" == *" 200 "* ]]
}

listens() {  # listens HOST:PORT: a TCP connection is accepted there
    (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null
}

ready() {  # ready NAME: it answers
    if [[ "$1" == collector ]]; then http_ok "$HEALTH" /; else http_ok "$QUERY" /api/v3/services; fi
}

otel_verl() {  # how this shell runs otel-verl (as otel_verl/invocation.py spells it in the CLI's own hints)
    local venv="$ROOT/.venv/bin/otel-verl"
    if command -v otel-verl >/dev/null 2>&1; then
        echo otel-verl
    elif [[ -x "$venv" || ! -x "$(command -v uv)" ]]; then  # no venv and no uv: after bootstrap.sh, the venv's
        if [[ "$venv" == "$PWD/"* ]]; then echo "${venv#"$PWD/"}"; else echo "$venv"; fi
    else
        echo "uv run otel-verl"
    fi
}

ensure_binaries() {
    local missing=0
    [[ -x "$(binary collector)" ]] || missing=1
    [[ -x "$(binary jaeger)" ]] || missing=1
    ((missing)) || return 0
    if ! command -v go >/dev/null 2>&1; then
        say "$(binary collector) or $(binary jaeger) is missing and Go (>= 1.24) is not installed to build them;" >&2
        say "install Go, or use Docker instead: docker compose up -d (docs/backends.md)" >&2
        exit 1
    fi
    say "building the collector and Jaeger from source (once; several minutes on 2 cores)"
    [[ -x "$(binary collector)" ]] || bash "$ROOT/scripts/build_collector.sh"
    [[ -x "$(binary jaeger)" ]] || bash "$ROOT/scripts/build_jaeger.sh"
}

stop() {  # stop NAME
    local pid
    if ! pid="$(running_pid "$1")"; then
        rm -f "$RUN/$1.pid"
        say "$1 is not running"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 150); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        say "$1 (pid $pid) did not stop in 15 s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$RUN/$1.pid"
    say "stopped $1 (pid $pid)"
}

up() {
    ensure_binaries
    mkdir -p "$RUN"
    local name started=()
    local deadline=$((SECONDS + 60))
    for name in jaeger collector; do  # Jaeger first, up before the collector sends to it (no refused dial)
        if running_pid "$name" >/dev/null; then
            say "$name already runs (pid $(running_pid "$name"))"
            continue
        fi
        local args=(--config "$ROOT/jaeger/config.yaml")
        if [[ "$name" == collector ]]; then
            args=(--config "$ROOT/collector/config.yaml" --config "$ROOT/collector/jaeger_only.yaml")
        fi
        nohup "$(binary "$name")" "${args[@]}" >"$RUN/$name.log" 2>&1 </dev/null &
        local child=$!
        echo "$child" >"$RUN/$name.pid"
        started+=("$name")
        until ready "$name" && { [[ "$name" == collector ]] || listens "$OTEL_VERL_JAEGER_OTLP_ENDPOINT"; }; do
            # alive, not running_pid: until nohup execs the binary, the child's cmdline is still this script's
            if ! kill -0 "$child" 2>/dev/null || ((SECONDS > deadline)); then
                say "$name did not come up (port in use? see its log, $RUN/$name.log):" >&2
                tail -n 15 "$RUN/$name.log" >&2 || true
                for name in "${started[@]}"; do stop "$name"; done
                exit 1
            fi
            sleep 0.3
        done
    done
    local ui="http://127.0.0.1:$QUERY" assets fresh=""
    assets="$(ui_of "$(running_pid jaeger)")"  # the running process's, not this shell's (it may be an older one)
    [[ " ${started[*]} " == *" jaeger "* ]] && fresh=" --ignore-journal"
    say "collector: OTLP gRPC 127.0.0.1:$GRPC, HTTP 127.0.0.1:$HTTP (pid $(running_pid collector), log $RUN/collector.log)"
    say "jaeger: $ui (pid $(running_pid jaeger), log $RUN/jaeger.log)"
    if [[ -z "$assets" ]]; then
        say "no Jaeger web UI here (API only): build one, docs/without-docker.md 'The Jaeger UI without Docker'"
    fi
    local spool=SPOOL_DIR
    [[ -d traces ]] && spool=./traces
    if ! command -v otel-verl >/dev/null 2>&1 && [[ ! -x "$ROOT/.venv/bin/otel-verl" ]]; then
        say "otel-verl is not installed here yet: bash scripts/bootstrap.sh makes .venv (or: pip install . in this repo)"
    fi
    echo "send traces there:"
    if [[ -n "$fresh" ]]; then
        echo "  $(otel_verl) replay $spool --endpoint http://127.0.0.1:$GRPC$fresh   # a spool, e.g. the demo's" \
            "./traces; --ignore-journal: this Jaeger is new and empty, spans sent to an earlier one go again"
    else
        echo "  $(otel_verl) replay $spool --endpoint http://127.0.0.1:$GRPC   # a spool, e.g. the demo's ./traces"
    fi
    echo "  export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$GRPC   # or a live run"
    if [[ -n "$assets" ]]; then
        echo "then open $ui: Search, Service verl, Find Traces (a trace per step; one step: Tags verl.step=2)." \
            "Stop: bash scripts/jaeger.sh down"
    else  # a Go-built Jaeger serves a placeholder page at /: point at what answers
        echo "then ask its API: curl '$ui/api/v3/services' (no web UI without one built, see above)." \
            "Stop: bash scripts/jaeger.sh down"
    fi
}

status() {
    local name pid code=0
    for name in "${NAMES[@]}"; do
        if pid="$(running_pid "$name")"; then
            if [[ "$name" == collector ]]; then
                say "collector runs (pid $pid): OTLP gRPC 127.0.0.1:$GRPC, HTTP 127.0.0.1:$HTTP, health :$HEALTH"
            elif [[ -n "$(ui_of "$pid")" ]]; then
                say "jaeger runs (pid $pid): web UI and API http://127.0.0.1:$QUERY"
            else
                say "jaeger runs (pid $pid): API http://127.0.0.1:$QUERY (no web UI)"
            fi
        else
            say "$name is not running"
            code=3
        fi
    done
    return "$code"
}

case "${1:-}" in
    up) up ;;
    down) for name in collector jaeger; do stop "$name"; done ;;
    status) status ;;
    *)
        echo "usage: bash scripts/jaeger.sh up|down|status (the collector and Jaeger without Docker)" >&2
        exit 2
        ;;
esac
