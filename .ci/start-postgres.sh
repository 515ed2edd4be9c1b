#!/usr/bin/env bash
# Installs (if missing) and starts a local PostgreSQL for the tests of the PostgreSQL notebook and
# the worker fleet (docs/distributed.md), with a role and a database the tests may create schemas
# in. Idempotent: a second run on the same machine changes nothing. Prints the URL to use as
# AUTOLAB_TEST_PG_URL. Run as root (CI), or by a developer with sudo rights the same way.
set -euo pipefail

installed=no
if ! command -v pg_ctlcluster >/dev/null; then
  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql
  installed=yes
fi
version=$(ls /etc/postgresql | sort -n | tail -1)
if pg_lsclusters -h | awk -v v="$version" '$1 == v && $2 == "main" && $4 == "online"' | grep -q .; then
  # Installing packages can upgrade a running server's libraries under it (seen: plpgsql.so
  # "undefined symbol" until restart); otherwise a running cluster is left alone.
  if [ "$installed" = yes ]; then pg_ctlcluster "$version" main restart; fi
else
  pg_ctlcluster "$version" main start
fi
for _ in $(seq 1 30); do
  pg_isready -q -h 127.0.0.1 && break
  sleep 1
done
pg_isready -h 127.0.0.1

psql_admin() { su postgres -c "psql -qtAX -v ON_ERROR_STOP=1 -c \"$1\""; }
if [ "$(psql_admin "SELECT 1 FROM pg_roles WHERE rolname = 'autolab_ci'")" != "1" ]; then
  psql_admin "CREATE ROLE autolab_ci LOGIN PASSWORD 'autolab_ci'"
fi
if [ "$(psql_admin "SELECT 1 FROM pg_database WHERE datname = 'autolab_ci'")" != "1" ]; then
  psql_admin "CREATE DATABASE autolab_ci OWNER autolab_ci"
fi
echo "postgres://autolab_ci:autolab_ci@127.0.0.1/autolab_ci"
