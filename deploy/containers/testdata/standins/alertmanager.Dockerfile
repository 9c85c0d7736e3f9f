# Stand-in for prom/alertmanager: Debian's Alertmanager 0.25, with wget for
# the health check, as nobody, storing in /alertmanager.
FROM debian:bookworm
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends prometheus-alertmanager wget \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /alertmanager /etc/alertmanager && chown nobody:nogroup /alertmanager
USER nobody
WORKDIR /alertmanager
EXPOSE 9093
ENTRYPOINT ["/usr/bin/prometheus-alertmanager"]
CMD ["--config.file=/etc/alertmanager/alertmanager.yml", "--storage.path=/alertmanager"]
