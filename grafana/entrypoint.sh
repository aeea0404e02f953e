#!/bin/sh
# Grafana's entrypoint in the compose stack: the admin password without a variable to set.
#
# Grafana creates its admin user once, on the first start of an empty data volume, with
# GF_SECURITY_ADMIN_PASSWORD. This script hands it one: $GRAFANA_ADMIN_PASSWORD when you set it,
# else a random 24-character password generated on that first start, kept in the data volume
# (mode 600) and printed once to the log. Later starts reuse the file and print where it is.
# Then Grafana's own entrypoint (/run.sh) runs; it reads GF_*__FILE variables.
#   docker compose logs grafana | grep 'admin password'
#   docker compose exec grafana cat /var/lib/grafana/otel-verl-admin-password
# The file keeps the first-start password: after you change it in Grafana, the file is stale.
set -eu
data="${GRAFANA_DATA_DIR:-/var/lib/grafana}"
file="$data/otel-verl-admin-password"
if [ -n "${GRAFANA_ADMIN_PASSWORD:-}" ]; then
    printf '%s' "$GRAFANA_ADMIN_PASSWORD" >"$file.tmp"
    chmod 600 "$file.tmp"
    mv "$file.tmp" "$file"
    echo "otel-verl: Grafana admin password from GRAFANA_ADMIN_PASSWORD (used when Grafana first creates its admin user)"
elif [ ! -s "$file" ]; then
    umask 077
    password="$(LC_ALL=C tr -dc 'A-Za-z0-9' </dev/urandom | head -c 24)"
    printf '%s' "$password" >"$file.tmp"
    mv "$file.tmp" "$file"
    echo "otel-verl: Grafana admin password (generated on first start): $password   user: admin"
else
    echo "otel-verl: Grafana admin password from the first start: docker compose exec grafana cat $file"
fi
export GF_SECURITY_ADMIN_PASSWORD__FILE="$file"
exec "${GRAFANA_RUN:-/run.sh}" "$@"
