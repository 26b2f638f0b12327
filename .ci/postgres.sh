# Sourced by .ci/run: start a throw-away PostgreSQL server on 127.0.0.1 and export its URL as
# TURNKIT_TEST_POSTGRES_URL. Installs Debian's server when the machine has none. Fails loudly.

pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$pg_bin" ]; then
  echo "ci: installing PostgreSQL from Debian's packages"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi

pg_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pg_data=$(mktemp -d /tmp/turnkit-ci-pg.XXXXXX)
as_pg=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  chown postgres "$pg_data"
  as_pg=(runuser -u postgres --)
fi

"${as_pg[@]}" "$pg_bin/initdb" -D "$pg_data/db" -U postgres -A trust --no-sync >/dev/null
"${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pg_data/db" -l "$pg_data/log" -w -t 60 start -o \
  "-c listen_addresses=127.0.0.1 -p $pg_port -k $pg_data -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >/dev/null

stop_postgres() { "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$pg_data/db" -m fast stop >/dev/null 2>&1 || true; }
trap stop_postgres EXIT

export TURNKIT_TEST_POSTGRES_URL="postgresql://postgres@127.0.0.1:$pg_port/postgres"
echo "ci: PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$pg_port"
