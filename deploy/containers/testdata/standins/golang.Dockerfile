# Stand-in for golang:GO_VERSION-bookworm: Debian bookworm with the tools
# the official image carries for builds (ca-certificates, curl, git) and
# the Go release the tag names, taken from the Go module proxy's toolchain
# by the build script, at the official image's paths and environment. It
# also trusts the authorities the host added to its own store
# (/usr/local/share/ca-certificates), as a network that inspects TLS
# requires of the build's downloads.
FROM debian:bookworm
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends ca-certificates curl git \
    && rm -rf /var/lib/apt/lists/*
COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
ARG GO_VERSION
COPY go /usr/local/go
ENV GOLANG_VERSION=${GO_VERSION} GOTOOLCHAIN=local GOPATH=/go \
    PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN test "$(go env GOVERSION)" = "go${GO_VERSION}" \
    && mkdir -p /go/src /go/bin && chmod -R 1777 /go
WORKDIR /go
