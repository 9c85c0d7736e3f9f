# Stand-in for prom/prometheus: Debian's Prometheus 2.42, with wget for the
# health check as the original's busybox has, started with the original's
# arguments, as nobody, storing in /prometheus.
FROM debian:bookworm
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends prometheus wget \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus /etc/prometheus && chown nobody:nogroup /prometheus
USER nobody
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
