# Stand-in for gcr.io/distroless/static-debian12:nonroot: no shell and no
# package manager, only what static binaries read (CA certificates, time
# zones, the users root, nobody and nonroot), run as nonroot (65532) from
# /home/nonroot, as the original is.
FROM debian:bookworm AS files
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/*
RUN mkdir -p /rootfs/etc/ssl/certs /rootfs/usr/share /rootfs/tmp /rootfs/root /rootfs/home/nonroot \
    && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ \
    && cp -a /usr/share/zoneinfo /rootfs/usr/share/ \
    && cp /etc/os-release /rootfs/etc/os-release \
    && printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /rootfs/etc/passwd \
    && printf 'root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n' > /rootfs/etc/group \
    && printf 'hosts: files dns\n' > /rootfs/etc/nsswitch.conf \
    && chmod 1777 /rootfs/tmp && chmod 0700 /rootfs/root /rootfs/home/nonroot \
    && chown 65532:65532 /rootfs/home/nonroot

FROM scratch
COPY --from=files /rootfs /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532
WORKDIR /home/nonroot
