# Stand-in for apache/kafka: the development broker (dev/broker, franz-go's
# kfake), which speaks Kafka's wire protocol, configured from the same
# environment as the original (see kafka-entrypoint) and answering the
# original's health check command.
FROM debian:bookworm
RUN useradd --uid 1000 --create-home appuser \
    && mkdir -p /var/lib/kafka/data /opt/kafka/bin \
    && chown appuser:appuser /var/lib/kafka/data
COPY broker /usr/local/bin/kfake-broker
COPY kafka-entrypoint kafka-env /usr/local/bin/
COPY kafka-broker-api-versions.sh /opt/kafka/bin/kafka-broker-api-versions.sh
USER appuser
EXPOSE 9092
ENTRYPOINT ["/usr/local/bin/kafka-entrypoint"]
