# Shared by scripts/serve, scripts/test, scripts/db and scripts/bench: what to install,
# the private PostgreSQL cluster under .local/pg, and the environment the server and tests read.
# Source it; do not run it.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# LENDER_LOCAL moves it all (the failover tests make clusters of their own there).
LOCAL="${LENDER_LOCAL:-$ROOT/.local}"
PG_DIR="$LOCAL/pg"
PGDATA="$PG_DIR/data"
PG_SOCKET="$PG_DIR/socket"
PG_LOGDIR="$PG_DIR/log"
DB_NAME=lender
DB_OWNER=lender

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }

pg_bindir() {
    local dir
    for dir in /usr/lib/postgresql/15/bin $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [ -x "$dir/initdb" ] && { echo "$dir"; return; }
    done
    command -v pg_config >/dev/null && pg_config --bindir
}

# Installs what is missing with apt-get when root; otherwise says what to install.
ensure_packages() {
    if ! command -v swift >/dev/null && [ -x /opt/swift/usr/bin/swift ]; then
        export PATH="/opt/swift/usr/bin:$PATH"
    fi
    command -v swift >/dev/null || die "Swift 6 is not installed (https://www.swift.org/install/linux/); install it and run this again."
    local need=()
    [ -n "${DATABASE_URL:-}" ] || [ -x "$(pg_bindir)/initdb" ] || need+=(postgresql postgresql-contrib)
    command -v psql >/dev/null || need+=(postgresql-client)
    command -v pkg-config >/dev/null || need+=(pkg-config)
    pkg-config --exists libpq 2>/dev/null || need+=(libpq-dev)
    pkg-config --exists vips 2>/dev/null || need+=(libvips-dev)
    pkg-config --exists libcurl 2>/dev/null || need+=(libcurl4-openssl-dev)
    [ ${#need[@]} -eq 0 ] && return
    if is_root && command -v apt-get >/dev/null; then
        say "installing ${need[*]}"
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    else
        die "missing packages; install them and run this again: sudo apt-get install ${need[*]}"
    fi
}

# initdb and postgres refuse root: as root, the cluster runs as an unprivileged system user.
pg_user() {
    if ! is_root; then id -un; return; fi
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    echo postgres
}

as_pg() {
    if is_root; then runuser -u "$(pg_user)" -- "$@"; else "$@"; fi
}

# The cluster's user must be able to reach .local/pg: grant traversal (not listing) where missing.
ensure_reachable() {
    is_root || return 0
    local user dir
    user=$(pg_user)
    dir="$LOCAL"
    while [ "$dir" != "/" ]; do
        if ! runuser -u "$user" -- test -x "$dir" 2>/dev/null; then
            say "letting $user pass through $dir (chmod o+x) to reach the cluster"
            chmod o+x "$dir"
        fi
        dir=$(dirname "$dir")
    done
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A port below the kernel's range for outgoing connections (32768 up here): one in it can be
# the local end of a client's connection when the cluster starts, and PostgreSQL then cannot
# bind it (a standby of the test suite failed so, its port held by one of the suite's own
# connections). Probing only finds listeners.
free_port() {
    local low span port
    low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    span=$((low - 21000))
    # A kernel whose range starts lower leaves no room below it: the old span, then.
    [ "$span" -ge 1000 ] || span=20000
    # From a point of this folder's own (the suite's drills each have a LENDER_LOCAL of their
    # own, and start at once): two of them do not race for the same free port.
    port=$((20000 + $(printf '%s' "$LOCAL" | cksum | cut -d' ' -f1) % span))
    while port_in_use "$port"; do port=$((port + 1)); done
    echo "$port"
}

pg_port() { cat "$PG_DIR/port"; }

cluster_running() {
    [ -f "$PGDATA/PG_VERSION" ] && as_pg "$(pg_bindir)/pg_ctl" -D "$PGDATA" status >/dev/null 2>&1
}

cluster_init() {
    [ -f "$PGDATA/PG_VERSION" ] && return
    local user port
    user=$(pg_user)
    mkdir -p "$PGDATA" "$PG_SOCKET" "$PG_LOGDIR"
    is_root && chown "$user" "$PGDATA" "$PG_SOCKET" "$PG_LOGDIR"
    chmod 700 "$PGDATA"
    ensure_reachable
    say "creating a private PostgreSQL cluster in $PGDATA"
    as_pg "$(pg_bindir)/initdb" -D "$PGDATA" -U postgres --auth=trust --encoding=UTF8 --no-locale >/dev/null
    port=$(free_port)
    echo "$port" >"$PG_DIR/port"
    cat >>"$PGDATA/postgresql.conf" <<CONF

# Lender's private cluster (scripts/lib.sh).
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$PG_SOCKET'
max_connections = 800
shared_buffers = 256MB
CONF
}

# Runs a command that leaves a server behind, passing it no descriptor but 0-2: a caller that
# waits for its child's descriptors to close (Foundation's Process does, through a socket the
# child inherits) would otherwise wait for PostgreSQL to stop.
without_inherited_fds() {
    (
        for fd in /proc/self/fd/*; do
            fd=${fd##*/}
            if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-" 2>/dev/null || true; fi
        done
        "$@"
    )
}

cluster_start() {
    [ -f "$PG_DIR/failed-over" ] &&
        die "the cluster in $PGDATA was failed over from (scripts/db promote): the standby in $REPLICA_DATA is the primary now. Starting this one would make two primaries. To begin again: scripts/db replica stop, then remove $PG_DIR and $REPLICA_DIR."
    cluster_init
    ensure_reachable
    cluster_running && return
    local port
    port=$(pg_port)
    if port_in_use "$port"; then
        port=$(free_port)
        say "port $(pg_port) is taken; the cluster moves to $port"
        echo "port = $port" >>"$PGDATA/postgresql.conf"
        echo "$port" >"$PG_DIR/port"
    fi
    # The whole suite, run in parallel, peaked above 300 connections, then at 500 with 420
    # tests ("remaining connection slots are reserved"): clusters made with a lower limit get
    # the current one.
    case "$(grep '^max_connections' "$PGDATA/postgresql.conf" | tail -1)" in
    "max_connections = 300" | "max_connections = 500") echo "max_connections = 800" >>"$PGDATA/postgresql.conf" ;;
    esac
    say "starting PostgreSQL on 127.0.0.1:$port"
    without_inherited_fds as_pg "$(pg_bindir)/pg_ctl" -D "$PGDATA" -l "$PG_LOGDIR/postgres.log" -w -t 60 start >/dev/null ||
        die "PostgreSQL did not start; see $PG_LOGDIR/postgres.log"
}

# `cluster_stop immediate`: as a crash would (no shutdown checkpoint), for failover drills.
cluster_stop() {
    cluster_running || return 0
    as_pg "$(pg_bindir)/pg_ctl" -D "$PGDATA" -m "${1:-fast}" -w stop >/dev/null
}

# A streaming standby of the cluster (scripts/db replica), under .local/pg-replica. It
# connects to the primary as `lender_replica`, the name `synchronous_standby_names` uses.
REPLICA_DIR="$LOCAL/pg-replica"
REPLICA_DATA="$REPLICA_DIR/data"
REPLICA_NAME=lender_replica

replica_port() { cat "$REPLICA_DIR/port"; }

replica_running() {
    [ -f "$REPLICA_DATA/PG_VERSION" ] && as_pg "$(pg_bindir)/pg_ctl" -D "$REPLICA_DATA" status >/dev/null 2>&1
}

replica_start() {
    cluster_running || die "the primary is not running: scripts/db start"
    if [ ! -f "$REPLICA_DATA/PG_VERSION" ]; then
        local user port
        user=$(pg_user)
        mkdir -p "$REPLICA_DIR/socket" "$REPLICA_DIR/log"
        is_root && chown "$user" "$REPLICA_DIR" "$REPLICA_DIR/socket" "$REPLICA_DIR/log"
        port=$(free_port)
        [ "$port" = "$(pg_port)" ] && port=$((port + 1))
        echo "$port" >"$REPLICA_DIR/port"
        # WAL the standby has not read yet stays this long even without a replication slot.
        pg_admin_psql -d postgres -c "ALTER SYSTEM SET wal_keep_size = '512MB'" -c "SELECT pg_reload_conf()" >/dev/null
        say "copying the primary into $REPLICA_DATA (pg_basebackup)"
        as_pg "$(pg_bindir)/pg_basebackup" -h "$PG_SOCKET" -p "$(pg_port)" -U postgres -D "$REPLICA_DATA" \
            --write-recovery-conf --wal-method=stream --checkpoint=fast >/dev/null
        # The primary's own synchronous_standby_names would make the standby, once promoted,
        # wait for a standby it does not have.
        as_pg sed -i '/^synchronous_standby_names/d' "$REPLICA_DATA/postgresql.auto.conf"
        as_pg tee -a "$REPLICA_DATA/postgresql.conf" >/dev/null <<CONF

# Lender's streaming standby (scripts/lib.sh): the walreceiver reports cluster_name.
port = $port
unix_socket_directories = '$REPLICA_DIR/socket'
cluster_name = '$REPLICA_NAME'
hot_standby = on
CONF
    fi
    if replica_running; then
        replica_urls
        return
    fi
    say "starting the standby on 127.0.0.1:$(replica_port)"
    without_inherited_fds as_pg "$(pg_bindir)/pg_ctl" -D "$REPLICA_DATA" -l "$REPLICA_DIR/log/postgres.log" -w -t 60 start >/dev/null ||
        die "the standby did not start; see $REPLICA_DIR/log/postgres.log"
    replica_urls
}

replica_stop() {
    replica_running || return 0
    as_pg "$(pg_bindir)/pg_ctl" -D "$REPLICA_DATA" -m "${1:-fast}" -w stop >/dev/null
}

# The replica's URL (READ_DATABASE_URL) and the pair's (DATABASE_URL: libpq tries both hosts and
# takes the one that accepts writes, so the server follows a promotion by itself).
replica_urls() {
    local primary replica
    primary=$(pg_port)
    replica=$(replica_port)
    echo "postgresql://$DB_OWNER@127.0.0.1:$replica/$DB_NAME" >"$LOCAL/replica-database-url"
    echo "postgresql://$DB_OWNER@127.0.0.1:$primary,127.0.0.1:$replica/$DB_NAME?target_session_attrs=read-write" \
        >"$LOCAL/failover-database-url"
    echo "postgresql://lender_server@127.0.0.1:$primary,127.0.0.1:$replica/$DB_NAME?target_session_attrs=read-write" \
        >"$LOCAL/failover-server-database-url"
}

# `sync on`: every commit waits until the standby has flushed it, so a promotion loses
# nothing acknowledged. `sync off`: commits do not wait (and a failover may lose the last).
replica_sync() {
    local names
    case "$1" in
    on) names=$REPLICA_NAME ;;
    off) names= ;;
    *) die "usage: scripts/db sync on|off" ;;
    esac
    pg_admin_psql -d postgres -c "ALTER SYSTEM SET synchronous_standby_names = '$names'" -c "SELECT pg_reload_conf()" >/dev/null
}

replica_promote() {
    replica_running || die "no standby is running: scripts/db replica"
    as_pg "$(pg_bindir)/pg_ctl" -D "$REPLICA_DATA" -w -t 60 promote >/dev/null ||
        die "the standby was not promoted; see $REPLICA_DIR/log/postgres.log"
    # The old primary must never run again as one: a server on the two-host URL would write to it.
    touch "$PG_DIR/failed-over"
}

pg_admin_psql() {
    psql -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCKET" -p "$(pg_port)" -U postgres "$@"
}

# The owner role and database, and the URLs everything else reads.
database_setup() {
    local port
    port=$(pg_port)
    pg_admin_psql -d postgres -At <<SQL >/dev/null
SET client_min_messages = warning;
SELECT 'CREATE ROLE $DB_OWNER LOGIN CREATEDB CREATEROLE'
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$DB_OWNER') \gexec
SELECT 'CREATE ROLE lender_app NOLOGIN'
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lender_app') \gexec
GRANT lender_app TO $DB_OWNER;
SELECT 'CREATE ROLE lender_server LOGIN'
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lender_server') \gexec
GRANT lender_app TO lender_server;
SELECT 'CREATE DATABASE $DB_NAME OWNER $DB_OWNER'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '$DB_NAME') \gexec
SQL
    echo "postgresql://$DB_OWNER@127.0.0.1:$port/$DB_NAME" >"$LOCAL/database-url"
    # What the server logs in as: a member of lender_app, not the owner (docs/OPERATIONS.md).
    echo "postgresql://lender_server@127.0.0.1:$port/$DB_NAME" >"$LOCAL/server-database-url"
}

# Everything up to a migrated-ready database; exports DATABASE_URL and LENDER_ADMIN_URL.
setup_database() {
    ensure_packages
    if [ -n "${DATABASE_URL:-}" ]; then
        say "using DATABASE_URL from the environment"
        export LENDER_ADMIN_URL="${LENDER_ADMIN_URL:-$DATABASE_URL}"
        return
    fi
    cluster_start
    database_setup
    DATABASE_URL=$(cat "$LOCAL/database-url")
    export DATABASE_URL
    export LENDER_ADMIN_URL="postgresql://postgres@127.0.0.1:$(pg_port)/postgres"
}

# The key of card fingerprints (SPEC §4): generated once into .local, kept for the life of
# the data (a new key no longer recognises cards added before). CARD_FINGERPRINT_SECRET or
# CARD_FINGERPRINT_SECRET_FILE from the environment win.
setup_card_secret() {
    [ -n "${CARD_FINGERPRINT_SECRET:-}" ] && return
    if [ -z "${CARD_FINGERPRINT_SECRET_FILE:-}" ]; then
        export CARD_FINGERPRINT_SECRET_FILE="$LOCAL/card-fingerprint-secret"
    fi
    if [ ! -s "$CARD_FINGERPRINT_SECRET_FILE" ]; then
        mkdir -p "$(dirname "$CARD_FINGERPRINT_SECRET_FILE")"
        (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$CARD_FINGERPRINT_SECRET_FILE")
        say "generated the card fingerprint secret in $CARD_FINGERPRINT_SECRET_FILE"
    fi
}

# The master key of personal data (SPEC §11.3): wraps every person's data key. Generated once
# into .local (its lines are base64 keys, newest first; `lender keys rotate-master` adds one);
# DATA_KEY_FILE from the environment wins. Lose it and no personal data in the log can be read.
setup_data_keys() {
    if [ -z "${DATA_KEY_FILE:-}" ]; then
        export DATA_KEY_FILE="$LOCAL/data-keys"
    fi
    if [ ! -s "$DATA_KEY_FILE" ]; then
        mkdir -p "$(dirname "$DATA_KEY_FILE")"
        (umask 077 && head -c 32 /dev/urandom | base64 >"$DATA_KEY_FILE")
        say "generated the master key of personal data in $DATA_KEY_FILE"
    fi
}

# The key that signs audit checkpoints (`lender audit checkpoint`, AUDIT_CHECKPOINT_EVERY):
# AUDIT_SIGNING_KEY_FILE from the environment, else one generated into .local once. Auditors
# hold its public key (`lender audit public-key`); a new key starts a new line of checkpoints.
setup_audit_key() {
    if [ -z "${AUDIT_SIGNING_KEY_FILE:-}" ]; then
        export AUDIT_SIGNING_KEY_FILE="$LOCAL/audit-signing-key"
    fi
    if [ ! -s "$AUDIT_SIGNING_KEY_FILE" ]; then
        mkdir -p "$(dirname "$AUDIT_SIGNING_KEY_FILE")"
        (umask 077 && head -c 32 /dev/urandom | base64 >"$AUDIT_SIGNING_KEY_FILE")
        say "generated the audit signing key in $AUDIT_SIGNING_KEY_FILE"
    fi
}

build() {
    say "building ($*)"
    # Package.swift lists migrations/*.sql as the binary's resources when it is read; SwiftPM
    # caches what it read, and its build plan. When the built resources are not the folder's
    # (a migration added since, or a file not yet on main changed: a cached plan may not copy
    # it again), build without those caches, so that the folder's files go in.
    local configuration=debug flags=()
    case " $* " in *" release "*) configuration=release ;; esac
    local built="$ROOT/.build/$configuration/lender_Migrations.resources"
    if [ "$(cd "$ROOT/migrations" && sha256sum -- *.sql)" != "$(cd "$built" 2>/dev/null && sha256sum -- *.sql 2>/dev/null)" ]; then
        flags=(--manifest-cache none --disable-build-manifest-caching)
    fi
    (cd "$ROOT" && swift build "${flags[@]}" "$@")
}

# Backups (SPEC §12.8): pgBackRest, with continuous WAL archiving, into a repository under
# .local (or PGBACKREST_REPO_PATH), encrypted with a key kept beside it (or the file
# PGBACKREST_CIPHER_PASS_FILE names). `scripts/db backup` sets it all up the first time.
BACKUP_DIR="$LOCAL/pgbackrest"
BACKUP_CONF="$BACKUP_DIR/pgbackrest.conf"
STANZA=lender

ensure_pgbackrest() {
    command -v pgbackrest >/dev/null && return
    if is_root && command -v apt-get >/dev/null; then
        say "installing pgbackrest"
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbackrest >/dev/null
    else
        die "pgbackrest is not installed: sudo apt-get install pgbackrest"
    fi
}

# A real browser for the desk's test (SPEC §12.6): Debian's Chromium and its driver, and
# Selenium from PyPI into .local/venv (driving the system Chromium, never downloading one).
ensure_browser() {
    if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
        if is_root && command -v apt-get >/dev/null; then
            say "installing chromium and chromium-driver"
            apt-get update -qq >/dev/null
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
        else
            die "the desk's browser test needs Chromium: sudo apt-get install chromium chromium-driver"
        fi
    fi
    local venv="$LOCAL/venv"
    if ! "$venv/bin/python" -c "import selenium" 2>/dev/null; then
        say "installing selenium into $venv"
        { [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"; } && "$venv/bin/pip" install -q "selenium==4.38.0" ||
            die "selenium could not be installed: the desk's browser test needs it"
    fi
}

backup_repo() { echo "${PGBACKREST_REPO_PATH:-$BACKUP_DIR/repo}"; }

as_backrest() { as_pg pgbackrest --config="$BACKUP_CONF" --stanza="$STANZA" "$@"; }

# The configuration, the stanza, and archiving on (a restart, the first time only).
backup_setup() {
    ensure_pgbackrest
    cluster_running || die "the cluster is not running: scripts/db start"
    local user repo pass_file
    user=$(pg_user)
    repo=$(backup_repo)
    pass_file="${PGBACKREST_CIPHER_PASS_FILE:-$BACKUP_DIR/cipher-pass}"
    mkdir -p "$BACKUP_DIR/log" "$BACKUP_DIR/lock" "$BACKUP_DIR/spool" "$repo"
    if [ ! -s "$pass_file" ]; then
        (umask 077 && head -c 48 /dev/urandom | base64 | tr -d '\n=' >"$pass_file")
        say "generated the backup repository's encryption key in $pass_file: keep a copy apart from the repository"
    fi
    (umask 027 && cat >"$BACKUP_CONF" <<CONF
# Lender's backups (scripts/lib.sh, docs/OPERATIONS.md "Backups"). Written by scripts/db.
[global]
repo1-path=$repo
repo1-cipher-type=aes-256-cbc
repo1-cipher-pass=$(cat "$pass_file")
repo1-retention-full=${PGBACKREST_RETENTION_FULL:-2}
log-path=$BACKUP_DIR/log
lock-path=$BACKUP_DIR/lock
spool-path=$BACKUP_DIR/spool
log-level-console=warn
log-level-file=info
start-fast=y
compress-type=zst

[$STANZA]
pg1-path=$PGDATA
pg1-port=$(pg_port)
pg1-socket-path=$PG_SOCKET
pg1-user=postgres
CONF
    )
    # The data folder's group too: a restore maps a group it does not know, and says so.
    if is_root; then chown -R "$user" "$BACKUP_DIR" "$repo" && chown "$user:" "$PGDATA"; fi
    ensure_reachable
    local command="pgbackrest --config=$BACKUP_CONF --stanza=$STANZA archive-push %p"
    if [ "$(pg_admin_psql -d postgres -At -c 'SHOW archive_mode')" != on ] ||
        [ "$(pg_admin_psql -d postgres -At -c 'SHOW archive_command')" != "$command" ]; then
        say "turning WAL archiving on (PostgreSQL restarts once)"
        # archive_timeout: a quiet primary's last minute of writes is archived all the same.
        pg_admin_psql -d postgres -c "ALTER SYSTEM SET archive_mode = on" \
            -c "ALTER SYSTEM SET archive_command = '$command'" -c "ALTER SYSTEM SET wal_level = replica" \
            -c "ALTER SYSTEM SET archive_timeout = '${PGBACKREST_ARCHIVE_TIMEOUT:-60}'" >/dev/null
        without_inherited_fds as_pg "$(pg_bindir)/pg_ctl" -D "$PGDATA" -m fast -w restart -l "$PG_LOGDIR/postgres.log" >/dev/null ||
            die "PostgreSQL did not restart; see $PG_LOGDIR/postgres.log"
    fi
    as_backrest stanza-create >/dev/null 2>&1 || as_backrest stanza-upgrade >/dev/null ||
        die "pgBackRest could not create its stanza; see $BACKUP_DIR/log"
}

# `backup full|diff|incr` (diff, or full when there is none yet).
backup_take() {
    local type=${1:-diff}
    case "$type" in full | diff | incr) ;; *) die "usage: scripts/db backup [full|diff|incr]" ;; esac
    backup_setup
    as_backrest --type="$type" backup || die "the backup failed; see $BACKUP_DIR/log"
    as_backrest info | sed -n '/backup:/p' | tail -1 >&2
}

backup_list() {
    [ -f "$BACKUP_CONF" ] || die "no backups yet: scripts/db backup"
    as_backrest info
}

# `restore --to TIME [--into DIR]`: a new cluster in DIR (under .local by default) as the log
# stood at TIME, promoted, on a port of its own, archiving off (it is a copy, not the primary).
backup_restore() {
    local target="" into=""
    while [ $# -gt 0 ]; do
        case "$1" in
        --to) target=${2:-}; shift 2 ;;
        --into) into=${2:-}; shift 2 ;;
        *) die "usage: scripts/db restore --to TIME [--into DIR]" ;;
        esac
    done
    [ -n "$target" ] || die "usage: scripts/db restore --to TIME [--into DIR]"
    [ -f "$BACKUP_CONF" ] || die "no backups yet: scripts/db backup"
    ensure_pgbackrest
    local epoch first
    epoch=$(date -d "$target" +%s 2>/dev/null) || die "not a time: $target (say 2026-11-29 01:23:45+00)"
    # The oldest backup's end: nothing before it can be restored.
    first=$(as_backrest info --output=json | python3 -c '
import json, sys
stanzas = json.load(sys.stdin)
stops = [b["timestamp"]["stop"] for s in stanzas for b in s.get("backup", [])]
print(min(stops) if stops else "")')
    [ -n "$first" ] || die "the repository holds no backup: scripts/db backup"
    [ "$epoch" -gt "$first" ] ||
        die "no backup ends before $target: the first ends at $(date -u -d "@$first" '+%F %T+00'); restore to a later time"
    [ "$epoch" -le "$(date +%s)" ] || die "$target is in the future"
    # The WAL up to now archived, when the primary runs: a target of a moment ago is in it.
    # Recovery stops at the first commit after the target, so one is made now (on a quiet
    # primary, the last commit may be before the target, and recovery would end short of it).
    if cluster_running; then
        pg_admin_psql -d postgres -At -c "SELECT txid_current()" >/dev/null
        as_backrest check >/dev/null || die "the primary's latest WAL could not be archived; see $BACKUP_DIR/log"
    fi
    into=${into:-$LOCAL/pg-restored-$(date -u -d "@$epoch" +%Y%m%dT%H%M%S)}
    [ ! -e "$into/data/PG_VERSION" ] || die "$into already holds a cluster"
    local user port
    user=$(pg_user)
    mkdir -p "$into/data" "$into/socket" "$into/log"
    is_root && chown -R "$user" "$into"
    chmod 700 "$into/data"
    say "restoring the cluster as it stood at $target into $into"
    as_backrest --log-level-console=error --pg1-path="$into/data" --type=time "--target=$target" --target-action=promote --target-timeline=current restore ||
        die "the restore failed; see $BACKUP_DIR/log"
    port=$(free_port)
    [ "$port" = "$(pg_port 2>/dev/null)" ] && port=$((port + 1))
    echo "$port" >"$into/port"
    as_pg tee -a "$into/data/postgresql.conf" >/dev/null <<CONF

# A restored copy (scripts/db restore): its own port and socket, no archiving into the
# primary's repository.
port = $port
unix_socket_directories = '$into/socket'
archive_mode = off
CONF
    as_pg sed -i '/^archive_mode/d;/^archive_command/d;/^synchronous_standby_names/d' "$into/data/postgresql.auto.conf"
    without_inherited_fds as_pg "$(pg_bindir)/pg_ctl" -D "$into/data" -l "$into/log/postgres.log" -w -t 120 start >/dev/null || true
    # Until the target is reached and the copy promoted, or recovery gives up.
    local waited=0
    while :; do
        if ! as_pg "$(pg_bindir)/pg_ctl" -D "$into/data" status >/dev/null 2>&1; then
            restore_failure "$into" "$target"
        fi
        [ "$(psql -X -At -h "$into/socket" -p "$port" -U postgres -d postgres -c 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ] && break
        waited=$((waited + 1))
        [ "$waited" -lt 600 ] || die "the restored cluster is still recovering after 5 minutes; see $into/log/postgres.log"
        sleep 0.5
    done
    echo "postgresql://$DB_OWNER@127.0.0.1:$port/$DB_NAME" >"$into/database-url"
    say "restored: DATABASE_URL=$(cat "$into/database-url") (stop it with: pg_ctl -D $into/data stop)"
    cat "$into/database-url"
}

# Recovery stopped short of the target: name the WAL segment the archive lacks, and stop.
restore_failure() {
    local into=$1 target=$2 last missing newest
    last=$(grep -o 'restored log file "[0-9A-F]\{24\}"' "$into/log/postgres.log" | tail -1 | grep -o '[0-9A-F]\{24\}' || true)
    if [ -n "$last" ]; then
        missing=$(printf '%s%08X%08X' "${last:0:8}" $((16#${last:8:8} + (16#${last:16:8} + 1) / 256)) $(((16#${last:16:8} + 1) % 256)))
        newest=$(as_backrest info --output=json | python3 -c '
import json, sys
print(max((a.get("max") or "" for s in json.load(sys.stdin) for a in s.get("archive", [])), default=""))')
        if [[ "$missing" > "$newest" ]]; then
            die "recovery stopped before $target: the archive ends at WAL segment $newest, and nothing after it was archived (a primary that died keeps its last writes, up to archive_timeout, in its own pg_wal); see $into/log/postgres.log"
        fi
        die "recovery stopped before $target: the archive lacks WAL segment $missing (the last restored was $last); see $into/log/postgres.log"
    fi
    die "recovery stopped before $target; see $into/log/postgres.log ($(grep -m1 -E 'FATAL|PANIC' "$into/log/postgres.log" || true))"
}

# Stops a restored copy (scripts/db restored-stop DIR).
restored_stop() {
    [ -f "${1:-}/data/PG_VERSION" ] || die "usage: scripts/db restored-stop DIR (a folder scripts/db restore made)"
    as_pg "$(pg_bindir)/pg_ctl" -D "$1/data" -m fast -w stop >/dev/null 2>&1 || true
}

# Automatic failover (SPEC §12.8): pg_auto_failover's monitor and two data nodes on loopback,
# under .local/ha, with synchronous replication; `scripts/db ha` (docs/OPERATIONS.md,
# "Automatic failover"). The keepers run in the background; the monitor promotes by itself.
HA_DIR="$LOCAL/ha"

ensure_autofailover() {
    command -v pg_autoctl >/dev/null && return
    if is_root && command -v apt-get >/dev/null; then
        say "installing postgresql-15-auto-failover"
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15-auto-failover >/dev/null
    else
        die "pg_auto_failover is not installed: sudo apt-get install postgresql-15-auto-failover"
    fi
}

# pg_autoctl as the cluster's user, its state and configuration under .local/ha, with every
# signal at its default: a caller that ignores SIGINT (a test runner) would pass that on, and
# pg_autoctl stops its services with SIGINT.
autoctl() {
    as_pg env --default-signal PATH="$(pg_bindir):$PATH" PG_CONFIG="$(pg_bindir)/pg_config" XDG_RUNTIME_DIR="$HA_DIR/run" \
        XDG_CONFIG_HOME="$HA_DIR/config" XDG_DATA_HOME="$HA_DIR/share" pg_autoctl "$@"
}

# A keeper (`pg_autoctl run`, or `create … --run`) in the background, its log in .local/ha:
# this very subshell closes what it inherited past 0-2 and becomes the keeper (a caller that
# waits for its child's descriptors to close would otherwise wait for the keeper).
autoctl_background() {
    local log=$1
    shift
    (
        for fd in /proc/self/fd/*; do
            fd=${fd##*/}
            if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-" 2>/dev/null || true; fi
        done
        set -- env --default-signal PATH="$(pg_bindir):$PATH" PG_CONFIG="$(pg_bindir)/pg_config" \
            XDG_RUNTIME_DIR="$HA_DIR/run" XDG_CONFIG_HOME="$HA_DIR/config" XDG_DATA_HOME="$HA_DIR/share" setsid pg_autoctl "$@"
        if is_root; then exec runuser -u "$(pg_user)" -- "$@"; else exec "$@"; fi
    ) >>"$log" 2>&1 </dev/null &
}

ha_port() { cat "$HA_DIR/$1.port"; }
ha_monitor_url() { echo "postgres://autoctl_node@127.0.0.1:$(ha_port monitor)/pg_auto_failover?sslmode=disable"; }

# A node's state as the monitor has it (`primary`, `secondary`, ...) once the node reports
# the state it was assigned (a dead primary still reads `primary` as reported); `moving`
# meanwhile; nothing without a monitor.
ha_node_state() {
    psql -X -At -h 127.0.0.1 -p "$(ha_port monitor)" -U postgres -d pg_auto_failover \
        -c "SELECT CASE WHEN reportedstate = goalstate THEN reportedstate::text ELSE 'moving' END
            FROM pgautofailover.node WHERE nodename = '$1'" 2>/dev/null || true
}

ha_wait_state() {
    local node=$1 pattern=$2 tries=${3:-120}
    for _ in $(seq "$tries"); do
        [[ "$(ha_node_state "$node")" =~ ^($pattern)$ ]] && return 0
        sleep 0.5
    done
    die "$node did not become $pattern (it is '$(ha_node_state "$node")'); see $HA_DIR/$node.log"
}

ha_start() {
    ensure_autofailover
    local user
    user=$(pg_user)
    mkdir -p "$HA_DIR/run" "$HA_DIR/config" "$HA_DIR/share"
    is_root && chown -R "$user" "$HA_DIR"
    ensure_reachable
    if [ ! -f "$HA_DIR/monitor/PG_VERSION" ]; then
        local port
        port=$(free_port)
        echo "$port" >"$HA_DIR/monitor.port"
        local node next=$port
        for node in node1 node2; do
            next=$((next + 1))
            while port_in_use "$next"; do next=$((next + 1)); done
            echo "$next" >"$HA_DIR/$node.port"
        done
        say "creating the pg_auto_failover monitor on 127.0.0.1:$port"
        autoctl create monitor --pgdata "$HA_DIR/monitor" --pgport "$port" --hostname 127.0.0.1 --auth trust --no-ssl \
            >>"$HA_DIR/monitor.log" 2>&1 || die "the monitor was not created; see $HA_DIR/monitor.log"
    fi
    pgrep -f "pg_autoctl run --pgdata $HA_DIR/monitor" >/dev/null || autoctl_background "$HA_DIR/monitor.log" run --pgdata "$HA_DIR/monitor"
    for _ in $(seq 60); do psql -X -At -h 127.0.0.1 -p "$(ha_port monitor)" -U postgres -d pg_auto_failover -c 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.5; done
    # Seconds, not the default half minute, before a silent node is failed over, and before
    # its standby stops waiting for it to demote itself (a primary cut off from the monitor
    # and its standby stops taking writes at the same pace): the drill's pace; see OPERATIONS.
    psql -X -q -h 127.0.0.1 -p "$(ha_port monitor)" -U postgres -d pg_auto_failover \
        -c "ALTER SYSTEM SET pgautofailover.health_check_period = ${HA_HEALTH_CHECK_MS:-1000}" \
        -c "ALTER SYSTEM SET pgautofailover.health_check_timeout = 1000" \
        -c "ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500" \
        -c "ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = ${HA_UNHEALTHY_MS:-5000}" \
        -c "ALTER SYSTEM SET pgautofailover.primary_demote_timeout = ${HA_DEMOTE_MS:-5000}" \
        -c "SELECT pg_reload_conf()" >/dev/null
    local node
    for node in node1 node2; do
        if [ ! -f "$HA_DIR/$node/PG_VERSION" ]; then
            say "creating $node on 127.0.0.1:$(ha_port "$node")"
            autoctl_background "$HA_DIR/$node.log" create postgres --pgdata "$HA_DIR/$node" --pgport "$(ha_port "$node")" \
                --hostname 127.0.0.1 --name "$node" --auth trust --no-ssl --monitor "$(ha_monitor_url)" --run
        elif ! pgrep -f "pg_autoctl run --pgdata $HA_DIR/$node\$" >/dev/null; then
            autoctl_background "$HA_DIR/$node.log" run --pgdata "$HA_DIR/$node"
        fi
        if [ "$node" = node1 ] && [ ! -f "$HA_DIR/roles-made" ]; then
            ha_wait_state node1 "primary|wait_primary|single"
            # The project's roles and database, on the primary: the standby copies them.
            (PG_SOCKET=127.0.0.1 && pg_port() { ha_port node1; } && LOCAL="$HA_DIR" && database_setup)
            touch "$HA_DIR/roles-made"
        fi
    done
    # pg_autoctl's base backup asks the primary for a spread checkpoint (minutes): an
    # immediate one ends the wait.
    for _ in $(seq 240); do
        [[ "$(ha_node_state node2)" =~ ^(secondary|primary)$ ]] && break
        ha_checkpoints
        sleep 0.5
    done
    ha_wait_state node2 "secondary|primary" 2
    local hosts="127.0.0.1:$(ha_port node1),127.0.0.1:$(ha_port node2)"
    echo "postgresql://$DB_OWNER@$hosts/$DB_NAME?target_session_attrs=read-write" >"$HA_DIR/database-url"
    echo "postgresql://lender_server@$hosts/$DB_NAME?target_session_attrs=read-write" >"$HA_DIR/server-database-url"
    cat "$HA_DIR/database-url"
}

# An immediate checkpoint on each node that answers (on the primary it ends a base backup's
# wait for its spread one; on a standby it is a harmless restartpoint).
ha_checkpoints() {
    local node
    for node in node1 node2; do
        psql -X -q -h 127.0.0.1 -p "$(ha_port "$node")" -U postgres -d postgres -c CHECKPOINT >/dev/null 2>&1 || true
    done
}

ha_other() { if [ "$1" = node1 ]; then echo node2; else echo node1; fi; }

# The node that takes writes now.
ha_primary() {
    local node
    for node in node1 node2; do
        [[ "$(ha_node_state "$node")" =~ ^(primary|wait_primary|single)$ ]] && { echo "$node"; return; }
    done
    die "no primary now: scripts/db ha state"
}

ha_state() { autoctl show state --pgdata "$HA_DIR/monitor"; }

# As the machine would die: the node's keeper and its PostgreSQL, SIGKILL.
ha_crash() {
    local node=${1:?usage: scripts/db ha crash node1|node2}
    # The keeper's services rename themselves ("pg_autoctl: node active"): the keeper's whole
    # session goes (it was started with setsid), PostgreSQL with it.
    local pidfile="$HA_DIR/run/pg_autoctl$HA_DIR/$node/pg_autoctl.pid" sid
    if [ -f "$pidfile" ] && sid=$(ps -o sid= -p "$(head -1 "$pidfile")" 2>/dev/null | tr -d ' ') && [ -n "$sid" ]; then
        pkill -KILL -s "$sid" 2>/dev/null || true
    fi
    [ -f "$HA_DIR/$node/postmaster.pid" ] && kill -KILL "$(head -1 "$HA_DIR/$node/postmaster.pid")" 2>/dev/null || true
    return 0
}

# A crashed node's keeper again: it rejoins as a standby (pg_rewind) by itself.
ha_rejoin() {
    local node=${1:?usage: scripts/db ha rejoin node1|node2}
    pgrep -f "pg_autoctl run --pgdata $HA_DIR/$node\$" >/dev/null || autoctl_background "$HA_DIR/$node.log" run --pgdata "$HA_DIR/$node"
    # A rejoin that cannot rewind takes a base backup, which waits for a spread checkpoint.
    # Done when the node is the standby and the primary has made it its synchronous one
    # (`primary`, no longer `wait_primary`, which commits without waiting for any standby).
    for _ in $(seq 480); do
        if [ "$(ha_node_state "$node")" = secondary ] && [ "$(ha_node_state "$(ha_other "$node")")" = primary ]; then
            return 0
        fi
        ha_checkpoints
        sleep 0.5
    done
    ha_wait_state "$node" secondary 2
}

ha_stop() {
    local dir
    for dir in node2 node1 monitor; do
        [ -f "$HA_DIR/$dir/PG_VERSION" ] || continue
        autoctl stop --pgdata "$HA_DIR/$dir" --immediate >/dev/null 2>&1 || true
    done
    sleep 1
    for dir in node2 node1 monitor; do ha_crash "$dir"; done
    return 0
}
