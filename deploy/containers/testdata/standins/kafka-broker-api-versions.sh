#!/bin/bash
# Kafka's kafka-broker-api-versions.sh as the health check calls it:
# --bootstrap-server HOST:PORT, answered by asking the broker for its API
# versions.
set -euo pipefail
while [ $# -gt 0 ]; do
  if [ "$1" = --bootstrap-server ] && [ $# -ge 2 ]; then
    exec /usr/local/bin/kfake-broker -api-versions "$2"
  fi
  shift
done
echo "usage: kafka-broker-api-versions.sh --bootstrap-server HOST:PORT" >&2
exit 2
