# Shared by bin/dev, bin/test, bin/package and bench: where each PostgreSQL
# major lives, how to install the extension into it, and how to run a
# throwaway server. PostgreSQL refuses to run as root; as root, the server
# runs as `postgres`.
#
# The majors raquel is built and tested for, the default first. 15 is Debian
# 12's own server; 16 comes built from a Python wheel, and 17 and 18 are
# built from Debian's source packages, by bin/postgres-major under
# RAQUEL_PG_PREFIX/MAJOR (Debian's layout below it). RAQUEL_PG_MAJOR (or
# use_major) picks the one these functions use.
#
# Nothing here writes those servers' files: raquel is built against them
# (their pg_config and headers, read only) and installed into a copy of
# each, a tree of the project's own under target/pg/PURPOSE/MAJOR, and the
# servers the scripts start run from that copy. PostgreSQL finds its lib
# and share directories relative to its binaries, so a copy of Debian's
# layout is a whole server. Each purpose has its own tree (RAQUEL_TREE:
# test for bin/test's servers, unit for its `cargo pgrx test`, dev for
# bin/dev, bench for the benchmarks), so that
# a test run that installs a new build never replaces the library under a
# server bin/dev started (a preloaded library replaced in place crashes
# its server; a new one beside it is loaded by new backends). Other
# servers on the machine, the system's own among them, are not touched.
PG_MAJORS=(15 16 17 18)
DEFAULT_PG_MAJOR=15
RAQUEL_PG_PREFIX=${RAQUEL_PG_PREFIX:-/opt/raquel-postgresql}
RAQUEL_HOME=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RAQUEL_TREES=${RAQUEL_TREES:-$RAQUEL_HOME/target/pg}
RAQUEL_TREE=${RAQUEL_TREE:-test}
# pgrx's own configuration (which pg_config each major's `cargo pgrx test`
# uses: the unit tree's) is the project's, not the user's ~/.pgrx.
export PGRX_HOME=${RAQUEL_PGRX_HOME:-$RAQUEL_HOME/target/pgrx}

# pristine_root MAJOR: the directory Debian's layout (usr/lib/postgresql/MAJOR
# …) of the server raquel builds against is under: / for the system's 15,
# the prefix's own root for the others. Read, never written.
pristine_root() { if [ "$1" = 15 ]; then echo /; else echo "$RAQUEL_PG_PREFIX/$1"; fi; }

# use_major MAJOR: PG_MAJOR; PG_BUILD_CONFIG, the pg_config of the server
# raquel builds against; PG_TREE, the copy of it for RAQUEL_TREE's purpose,
# with PG_BIN and PG_CONFIG, its binaries and pg_config (ensure_tree makes it).
use_major() {
  case " ${PG_MAJORS[*]} " in
    *" $1 "*) ;;
    *) echo "PostgreSQL $1 is not one of raquel's majors (${PG_MAJORS[*]})" >&2; return 2 ;;
  esac
  PG_MAJOR=$1
  PG_PRISTINE=$(pristine_root "$1" | sed 's:/$::')
  PG_BUILD_CONFIG=$PG_PRISTINE/usr/lib/postgresql/$1/bin/pg_config
  PG_TREE=$RAQUEL_TREES/$RAQUEL_TREE/$1
  PG_BIN=$PG_TREE/usr/lib/postgresql/$1/bin
  PG_CONFIG=$PG_BIN/pg_config
}
use_major "${RAQUEL_PG_MAJOR:-$DEFAULT_PG_MAJOR}"

# ensure_tree: PG_TREE, made from PG_MAJOR's server on first use and made
# again when that server changes (a new point release): its binaries,
# libraries, share directory and headers, and a dpkg database in which the
# server is installed (the package test installs raquel's .deb into a copy
# with `dpkg --root`). Extensions installed into the server since (PGQ for
# the benchmarks, Citus) are added to it; raquel's own files are not.
ensure_tree() {
  local from=$PG_PRISTINE postgres=$PG_PRISTINE/usr/lib/postgresql/$PG_MAJOR/bin/postgres want dir f
  [ -x "$postgres" ] || { echo "PostgreSQL $PG_MAJOR is not installed at ${from:-/} (bin/setup, bin/postgres-major $PG_MAJOR)" >&2; return 1; }
  want="$("$postgres" --version) $(stat -c '%s %Y' "$postgres")"
  if [ "$(cat "$PG_TREE/.raquel-tree" 2>/dev/null)" != "$want" ]; then
    rm -rf "$PG_TREE"
    for dir in "usr/lib/postgresql/$PG_MAJOR" "usr/share/postgresql/$PG_MAJOR" usr/include/postgresql; do
      [ -d "$from/$dir" ] || continue
      mkdir -p "$PG_TREE/$(dirname "$dir")"
      cp -a "$from/$dir" "$PG_TREE/$dir"
    done
    find "$PG_TREE" -name 'raquel*' \( -path '*/lib/*' -o -path '*/extension/*' \) -delete
    mkdir -p "$PG_TREE/var/lib/dpkg/info" "$PG_TREE/var/lib/dpkg/updates"
    if [ -n "$from" ]; then
      # bin/postgres-major's root has a database of its own
      cp -a "$from/var/lib/dpkg/." "$PG_TREE/var/lib/dpkg/"
    else
      # the system's 15: its package's entry from the system's database
      { dpkg-query -s "postgresql-$PG_MAJOR"; echo; } >"$PG_TREE/var/lib/dpkg/status"
      : >"$PG_TREE/var/lib/dpkg/available"
      dpkg-query -L "postgresql-$PG_MAJOR" >"$PG_TREE/var/lib/dpkg/info/postgresql-$PG_MAJOR.list"
    fi
    echo "$want" >"$PG_TREE/.raquel-tree"
  fi
  for dir in "usr/lib/postgresql/$PG_MAJOR/lib" "usr/share/postgresql/$PG_MAJOR/extension"; do
    for f in "$from/$dir"/*; do
      case "${f##*/}" in raquel*) continue ;; esac
      [ -e "$PG_TREE/$dir/${f##*/}" ] || cp -a "$f" "$PG_TREE/$dir/"
    done
  done
}

# system_fingerprint: the name, size and time of every file of the
# system's PostgreSQL 15 (its lib and share directories): bin/test checks
# after every stage that it has not changed.
system_fingerprint() {
  find /usr/lib/postgresql /usr/share/postgresql -printf '%p %s %T@\n' 2>/dev/null | sort | sha256sum | cut -c1-16
}

if [ "$(id -u)" -eq 0 ]; then
  AS_PG=(sudo -u postgres)
else
  AS_PG=()
fi

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# apt-get as root, waiting up to 10 minutes for the dpkg lock rather than
# failing at once when another apt holds it (bin/test builds the other
# majors and Citus side by side, each of which may install packages; a
# fresh machine runs its own apt timers).
apt_get() { as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }

# A running server that preloaded raquel has its library mapped into memory:
# a new build copied over that file in place crashes it. Renaming the file
# away first lets a running server keep the old one (its inode lives on
# until it exits) while the new build is written to a fresh file.
retire_installed_library() {
  local lib=$PG_TREE/usr/lib/postgresql/$PG_MAJOR/lib/raquel.so
  if [ -e "$lib" ]; then
    mv -f "$lib" "$lib.retired"
    rm -f "$lib.retired"
  fi
}

# raquel_version: the version being built (Cargo.toml's).
raquel_version() { sed -nE '0,/^version *= *"(.*)"/s//\1/p' "$RAQUEL_HOME/Cargo.toml"; }

# register_pgrx MAJOR PG_CONFIG: names PG_CONFIG as MAJOR's server in
# pgrx's config.toml (PGRX_HOME), which pgrx-pg-sys's build reads for the
# headers it binds to: the line `cargo pgrx init --pgMAJOR PG_CONFIG`
# writes, written here so that building needs no cargo-pgrx. The file is
# rewritten only when the line changes: pgrx-pg-sys rebuilds after every
# change to it.
register_pgrx() {
  local major=$1 config=$2 file=$PGRX_HOME/config.toml
  grep -qsx "pg$major = \"$config\"" "$file" && return 0
  mkdir -p "$PGRX_HOME"
  { echo "[configs]"
    { grep -s '^pg[0-9]* = ' "$file" || true; } | { grep -v "^pg$major = " || true; }
    echo "pg$major = \"$config\""
  } >"$file.new"
  mv "$file.new" "$file"
}

# register_unit_tree: the unit tree of PG_MAJOR (target/pg/unit/MAJOR)
# made, and registered with pgrx: builds bind to its headers (the server's
# own, copied), and `cargo pgrx test` installs its test build into it (the
# server pgrx knows by that major), a tree of its own, so that the unit
# tests can run beside the test servers of the test tree.
register_unit_tree() {
  (RAQUEL_TREE=unit && use_major "$PG_MAJOR" && ensure_tree && register_pgrx "$PG_MAJOR" "$PG_CONFIG")
}

# target_of_major: the target directory PG_MAJOR builds in: target/ for
# the default major, target/pgMAJOR for each other one, so that majors
# build side by side.
target_of_major() {
  if [ "$PG_MAJOR" = "$DEFAULT_PG_MAJOR" ]; then echo "$RAQUEL_HOME/target"; else echo "$RAQUEL_HOME/target/pg$PG_MAJOR"; fi
}

# major_cargo ARGS…: cargo for PG_MAJOR, its artifacts in target_of_major.
# Every major shares one build directory (target/majors): most of a build
# is crates that do not depend on the major, compiled once for all (a fresh
# clone's release build for 18 took 65 s after 17's instead of 108; 15's
# first shares them since 0.6.0). Its cost: the library itself is rebuilt
# when the major changes (29 s), as the majors' builds share its
# intermediate file; and two builds of different majors take turns (cargo
# locks the directory), so bin/test's background builds of the other
# majors wait for the first major's build (first_build_done).
major_cargo() {
  CARGO_TARGET_DIR=$(target_of_major) CARGO_BUILD_BUILD_DIR=$RAQUEL_HOME/target/majors cargo "$@"
}

# build_library: the extension's library for PG_MAJOR, a release build
# (target_of_major/release/libraquel.so), with pgrx bound to the unit tree's
# headers.
build_library() {
  register_unit_tree &&
    (cd "$RAQUEL_HOME" && major_cargo build --lib --release --no-default-features --features "pg$PG_MAJOR" >&2)
}

# build_stage: builds the extension (release) for PG_MAJOR with plain
# cargo (no cargo-pgrx: a user who only runs raquel needs Rust, clang and
# the server's headers) into a staging tree,
# target/release/raquel-stage-MAJOR (the server's own paths under it), and
# prints its path. The staging tree is what `cargo pgrx package` makes: the
# library, the control file with its version, and from sql/ every install
# script (the released ones, and this version's, which bin/schema writes
# from pgrx's schema of the library and bin/test checks) and every update
# script.
build_stage() {
  local stage=$RAQUEL_HOME/target/release/raquel-stage-$PG_MAJOR version lib ext
  version=$(raquel_version)
  [ -f "$RAQUEL_HOME/sql/raquel--$version.sql" ] ||
    { echo "sql/raquel--$version.sql is missing: bin/schema writes it" >&2; return 1; }
  lib=$stage$("$PG_BUILD_CONFIG" --pkglibdir)
  ext=$stage$("$PG_BUILD_CONFIG" --sharedir)/extension
  rm -rf "$stage" &&
    build_library &&
    mkdir -p "$lib" "$ext" &&
    install -m 755 "$(target_of_major)/release/libraquel.so" "$lib/raquel.so" &&
    sed "s/@CARGO_VERSION@/$version/" "$RAQUEL_HOME/raquel.control" >"$ext/raquel.control" &&
    chmod 644 "$ext/raquel.control" &&
    install -m 644 "$RAQUEL_HOME"/sql/raquel--*.sql "$ext/" &&
    echo "$stage"
}

# Builds the extension (release) into a staging tree, then installs it into
# PG_TREE (made first if need be); the old library is retired only once the
# new one is built, so servers that are running lose it for no more than a
# moment.
# With RAQUEL_STAGE_BUILT set (bin/test, after its background build of the
# major), the staging tree that build made is installed as it is.
install_extension() {
  local stage
  if [ -n "${RAQUEL_STAGE_BUILT:-}" ]; then
    echo "== installing the extension into PostgreSQL $PG_MAJOR ($PG_TREE), as built in the background"
    stage=$RAQUEL_HOME/target/release/raquel-stage-$PG_MAJOR
    [ -f "$stage$("$PG_BUILD_CONFIG" --pkglibdir)/raquel.so" ] || { echo "no staging tree in $stage" >&2; return 1; }
  else
    echo "== building and installing the extension into PostgreSQL $PG_MAJOR ($PG_TREE)"
    stage=$(build_stage) || return 1
  fi
  ensure_tree || return 1
  retire_installed_library
  rm -f "$PG_TREE/usr/share/postgresql/$PG_MAJOR/extension"/raquel*
  cp -r "$stage$PG_PRISTINE/usr/." "$PG_TREE/usr/"
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
    # The test ports are inside Linux's range of ephemeral ports, so a
    # client connection of a stage running beside can hold one for a while
    # (seen once in CI: "could not bind … Address already in use" on a
    # lane's port): try again for up to half a minute.
    local tries=0
    until "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null; do
      if [ $tries -lt 10 ] && grep -q "Address already in use" "$dir/server.log" 2>/dev/null; then
        tries=$((tries + 1))
        echo "the port of the server in $dir is in use; trying again in 3 s" >&2
        sleep 3
        continue
      fi
      echo "the server in $dir did not start; its log:" >&2
      cat "$dir/server.log" >&2
      return 1
    done
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
citus.enable_unsafe_triggers = on
# Test clusters only (bin/test's): nothing here outlives the run.
fsync = off"
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
