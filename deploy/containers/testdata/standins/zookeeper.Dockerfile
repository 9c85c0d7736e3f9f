# Stand-in for clickhouse/clickhouse-keeper: Debian's ZooKeeper 3.8, which
# ClickHouse Keeper replaces and whose protocol it speaks, on Keeper's
# client port (9181) with its data in /var/lib/clickhouse, and netcat for
# the health check's "ruok".
FROM debian:bookworm
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends zookeeper netcat-openbsd \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/clickhouse && chown zookeeper:zookeeper /var/lib/clickhouse
COPY zookeeper-entrypoint /usr/local/bin/zookeeper-entrypoint
USER zookeeper
EXPOSE 9181
ENTRYPOINT ["/usr/local/bin/zookeeper-entrypoint"]
