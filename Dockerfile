# otelcol-nemo container image.
#
# FROM scratch: nothing is pulled from any registry, so the image builds on a
# machine with no registry access. It holds only what the collector needs: the
# static binary built by `make build` (ocb, CGO_ENABLED=0), the presets, the
# host's CA bundle (for HTTPS exporters: Weave, Honeycomb, OTLP backends), a
# passwd/group entry for the non-root user, and a static health-check probe.
#
# Build with `make docker` (docker/build.sh): it stages those files into
# docker/context/ (git-ignored; .dockerignore sends nothing else) and runs
# `docker build`. A plain `docker build .` or `docker compose build` works once
# docker/build.sh has staged the context.
#
# Run:  docker run --rm -p 127.0.0.1:4317:4317 -p 127.0.0.1:4318:4318 \
#         -v otel-data:/data otelcol-nemo:local                      (file preset)
#       docker run ... otelcol-nemo:local --config=/etc/otel/collector-honeycomb.yaml
# A host directory mounted at /data must be writable by uid 10001 (the presets
# create telemetry/ and queue/ in it):
#       mkdir -p data && sudo chown 10001:10001 data
# A config of your own (the NeMo Lens page's examples) runs as the page shows it:
#       docker run --rm -p 127.0.0.1:4317:4317 -v $(pwd)/otel-collector.yaml:/etc/otel-collector.yaml \
#         otelcol-nemo:local --config=/etc/otel-collector.yaml
# its stock `file` exporter writing /var/log/otel/telemetry.jsonl (mount a
# volume there to keep it).
FROM scratch

ARG VERSION=dev
LABEL org.opencontainers.image.title="otelcol-nemo" \
      org.opencontainers.image.description="OpenTelemetry Collector distribution for ML-training telemetry (NeMo Lens, Megatron-LM, NeMo-RL)" \
      org.opencontainers.image.version="${VERSION}"

# /etc/passwd and /etc/group (root and otelcol, uid/gid 10001), the CA bundle
# at Go's default path /etc/ssl/certs/ca-certificates.crt, and /tmp (1777).
COPY docker/context/rootfs/ /

COPY docker/context/otelcol-nemo /otelcol-nemo
COPY docker/context/healthcheck /healthcheck

# Every preset and overlay in /etc/otel/configs/, and by name (links into
# it): /etc/otel/<preset>.yaml, /etc/otel/collector-<preset>.yaml as the
# NeMo Lens docs name them, /etc/otel/overlays/<overlay>.yaml, and the
# default /etc/otel/collector.yaml, the file preset (JSONL under /data).
# docker-compose mounts the repository's configs/ over /etc/otel/configs/.
COPY docker/context/etc-otel/ /etc/otel/

# The data volume: file-preset output in /data/telemetry, persistent sending
# queues in /data/queue. Owned by the collector's user so that a named volume
# (initialised from the image) is writable.
COPY --chown=10001:10001 docker/context/data/ /data/

# /var/log/otel, writable by the collector's user: the NeMo Lens page's stock
# `file` exporter examples write /var/log/otel/telemetry.jsonl, and a scratch
# image has no /var/log at all (the exporter does not create directories).
COPY --chown=10001:10001 docker/context/var-log-otel/ /var/log/otel/

ENV OTELCOL_LISTEN_HOST=0.0.0.0 \
    NEMO_TELEMETRY_DIR=/data/telemetry \
    NEMO_QUEUE_DIR=/data/queue

USER 10001:10001
VOLUME ["/data"]

# OTLP gRPC, OTLP HTTP, health_check, the collector's own metrics, and the
# Prometheus exporter of the jaeger and fanout presets, and the run pages
# (nemo_view) of every preset with step metrics.
EXPOSE 4317 4318 13133 8888 8889 8890

# No shell or curl in a scratch image: /healthcheck GETs
# http://127.0.0.1:${HEALTH_CHECK_PORT:-13133}/ and exits 0 on 2xx, 1 otherwise.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/healthcheck"]

ENTRYPOINT ["/otelcol-nemo"]
CMD ["--config=/etc/otel/collector.yaml"]
