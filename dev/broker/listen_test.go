package main

import (
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestAdvertisedListener checks that a broker listening on one address
// names another to clients, and that the health probe answers for it and
// fails for a port nobody serves.
func TestAdvertisedListener(t *testing.T) {
	c, err := kfake.NewCluster(kfake.Ports(0), kfake.ListenFn(listenFn("127.0.0.1", "kafka")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "kafka" || port == "0" {
		t.Fatalf("advertised %q, want kafka with the port listened on", addr)
	}
	if err := probeAPIVersions(t.Context(), net.JoinHostPort("127.0.0.1", port), nil); err != nil {
		t.Errorf("probe the broker: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if err := probeAPIVersions(t.Context(), closed, nil); err == nil || !strings.Contains(err.Error(), closed) {
		t.Errorf("probe of %s, where nothing listens: %v; want an error naming it", closed, err)
	}
}
