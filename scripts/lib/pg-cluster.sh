# A private PostgreSQL cluster for the tests: initdb + pg_ctl on a free loopback port in a temp
# dir, owned by the unprivileged `postgres` user (PostgreSQL refuses to run as root).
# Sets PG_URL; pg_cluster_stop stops it and removes the directory.

pg_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)
  [[ -n $dir ]] || { echo "PostgreSQL server binaries not found (apt-get install postgresql)" >&2; return 1; }
  echo "$dir"
}

pg_as_owner() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_cluster_start() {
  local bin port
  bin=$(pg_bin)
  PG_DIR=$(mktemp -d /tmp/ums-pg.XXXXXX)
  [[ $(id -u) -eq 0 ]] && chown postgres: "$PG_DIR"
  port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
  pg_as_owner "$bin/initdb" -D "$PG_DIR/data" -U ums --auth=trust --locale=C.UTF-8 --encoding=UTF8 >/dev/null
  pg_as_owner "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w -t 30 \
    -o "-k $PG_DIR -h 127.0.0.1 -p $port -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" start >/dev/null
  PG_URL="postgres://ums@127.0.0.1:$port/postgres"
  export PG_DIR PG_URL
}

pg_cluster_stop() {
  [[ -n ${PG_DIR:-} && -d $PG_DIR ]] || return 0
  pg_as_owner "$(pg_bin)/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$PG_DIR"
}
