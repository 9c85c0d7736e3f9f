# Stand-in for clickhouse/clickhouse-server: Debian's ClickHouse 18.16, the
# only server that can be installed here, with an entrypoint that creates
# the user of CLICKHOUSE_USER and CLICKHOUSE_PASSWORD as the original's
# does, and listens on every interface. Its default configuration names a
# Diffie-Hellman parameters file the package does not ship (current servers
# name none): the line is removed, or no TLS port opens.
FROM debian:bookworm
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends clickhouse-server clickhouse-client \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /etc/clickhouse-server/config.d /etc/clickhouse-server/users.d /var/lib/clickhouse \
    && sed -i '/<dhParamsFile>/d' /etc/clickhouse-server/config.xml \
    && chown clickhouse:clickhouse /var/lib/clickhouse
COPY clickhouse-listen.xml /etc/clickhouse-server/config.d/listen.xml
COPY clickhouse-profile.xml /etc/clickhouse-server/users.d/low-cardinality.xml
COPY clickhouse-entrypoint /usr/local/bin/clickhouse-entrypoint
EXPOSE 9000 8123
ENTRYPOINT ["/usr/local/bin/clickhouse-entrypoint"]
