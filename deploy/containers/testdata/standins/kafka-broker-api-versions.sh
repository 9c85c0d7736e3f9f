#!/bin/bash
# Kafka's kafka-broker-api-versions.sh as the health check calls it
# (--bootstrap-server HOST:PORT), answered by asking the broker for its API
# versions. The broker has a single listener: a check that names another
# address on this host (such as an inter-broker listener on loopback) asks
# that listener, with its TLS and SASL.
set -euo pipefail
source /usr/local/bin/kafka-env
while [ $# -gt 0 ]; do
  if [ "$1" = --bootstrap-server ] && [ $# -ge 2 ]; then
    exec /usr/local/bin/kfake-broker "${security[@]}" -api-versions "127.0.0.1:$port"
  fi
  shift
done
echo "usage: kafka-broker-api-versions.sh --bootstrap-server HOST:PORT" >&2
exit 2
