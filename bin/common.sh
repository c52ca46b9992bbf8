# Shared by bin/dev, bin/test, bin/package and bench: where each PostgreSQL
# major lives, how to install the extension into it, and how to run a
# throwaway server. PostgreSQL refuses to run as root; as root, the server
# runs as `postgres`.
#
# The majors raquel is built and tested for, the default first. 15 is Debian
# 12's own server; 17 and 18 are built from Debian's source packages by
# bin/postgres-major under RAQUEL_PG_PREFIX/MAJOR (Debian's layout below
# it). RAQUEL_PG_MAJOR (or use_major) picks the one these functions use.
PG_MAJORS=(15 17 18)
DEFAULT_PG_MAJOR=15
RAQUEL_PG_PREFIX=${RAQUEL_PG_PREFIX:-/opt/raquel-postgresql}

# pg_root MAJOR: the directory Debian's layout (usr/lib/postgresql/MAJOR …)
# is under: / for the system's 15, the prefix's own root for the others.
pg_root() { if [ "$1" = 15 ]; then echo /; else echo "$RAQUEL_PG_PREFIX/$1"; fi; }
pg_bin_of() { echo "$(pg_root "$1" | sed 's:/$::')/usr/lib/postgresql/$1/bin"; }

# use_major MAJOR: PG_MAJOR, PG_BIN and PG_CONFIG for that major.
use_major() {
  case " ${PG_MAJORS[*]} " in
    *" $1 "*) ;;
    *) echo "PostgreSQL $1 is not one of raquel's majors (${PG_MAJORS[*]})" >&2; return 2 ;;
  esac
  PG_MAJOR=$1
  PG_BIN=$(pg_bin_of "$1")
  PG_CONFIG=$PG_BIN/pg_config
}
use_major "${RAQUEL_PG_MAJOR:-$DEFAULT_PG_MAJOR}"

if [ "$(id -u)" -eq 0 ]; then
  AS_PG=(sudo -u postgres)
else
  AS_PG=()
fi

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# A running server that preloaded raquel has its library mapped into memory:
# a new build copied over that file in place crashes it. Renaming the file
# away first lets running servers keep the old one (its inode lives on until
# they exit) while the new build is written to a fresh file.
retire_installed_library() {
  local lib
  lib="$("$PG_CONFIG" --pkglibdir)/raquel.so"
  if [ -e "$lib" ]; then
    as_root mv -f "$lib" "$lib.retired"
    as_root rm -f "$lib.retired"
  fi
}

# build_stage: builds the extension (release) for PG_MAJOR into a staging
# tree, target/release/raquel-stage-MAJOR (the server's own paths under it),
# and prints its path. The install scripts of released versions are added
# (pgrx copies only the update scripts), so that the upgrade test can create
# an old version and a package updates from the oldest release.
# The default major builds in target/, each other one in a target
# directory of its own (target/pg17 …), so that majors build side by side.
build_stage() {
  local stage=target/release/raquel-stage-$PG_MAJOR target=$PWD/target
  [ "$PG_MAJOR" = "$DEFAULT_PG_MAJOR" ] || target=$PWD/target/pg$PG_MAJOR
  rm -rf "$stage" &&
    CARGO_TARGET_DIR=$target cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$stage" >&2 &&
    cp sql/raquel--0.1.0.sql sql/raquel--0.2.0.sql sql/raquel--0.3.0.sql sql/raquel--0.4.0.sql sql/raquel--0.5.0.sql "$stage$("$PG_CONFIG" --sharedir)/extension/" &&
    echo "$stage"
}

# Builds the extension (release) into a staging tree, then installs it into
# PG_MAJOR's server; the old library is retired only once the new one is
# built, so servers that are running lose it for no more than a moment.
install_extension() {
  echo "== building and installing the extension into PostgreSQL $PG_MAJOR"
  local stage
  stage=$(build_stage) || return 1
  retire_installed_library
  as_root cp -r "$stage"/. /
}

# start_server DIR PORT [SETTINGS]: a cluster in DIR/data (made on first use)
# with the extension preloaded, listening on a socket in DIR and on
# 127.0.0.1:PORT. SETTINGS (postgresql.conf lines) come last, so they win.
start_server() {
  local dir=$1 port=$2 settings=${3:-}
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    "${AS_PG[@]}" "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
    cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
shared_preload_libraries = 'raquel'
max_connections = 100
# Every message with its SQLSTATE, which the tests read in the log.
log_error_verbosity = verbose
$settings
CONF
  fi
  if ! "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null ||
      { echo "the server in $dir did not start; its log:" >&2; cat "$dir/server.log" >&2; return 1; }
  fi
}

stop_server() {
  "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$1/data" -m fast -w stop >/dev/null 2>&1 || true
}

# Citus (docs/src/guides/citus.md): start_citus DIR PORT starts a
# coordinator on PORT and two worker nodes on PORT+1 and PORT+2, each a
# cluster under DIR with citus and raquel preloaded. Citus joins nodes per
# database: each test database is joined when it is made
# (tests/client/src/lib.rs fresh_citus_db). stop_citus DIR stops them.
CITUS_NODES=(coordinator worker1 worker2)
CITUS_SETTINGS="shared_preload_libraries = 'citus,raquel'
max_connections = 200
max_prepared_transactions = 200
# Citus keeps a maintenance worker per database, beside raquel's own.
max_worker_processes = 32
# raquel's jobs table has triggers, which run on its shards.
citus.enable_unsafe_triggers = on"
start_citus() {
  local dir=$1 port=$2 i
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  for i in 0 1 2; do
    start_server "$dir/${CITUS_NODES[$i]}" $((port + i)) "$CITUS_SETTINGS" || return 1
  done
}

stop_citus() {
  local node
  for node in "${CITUS_NODES[@]}"; do
    stop_server "$1/$node"
  done
}
