package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// advertisedListener listens on one address and names another to clients:
// kfake tells clients the address its listener reports, and a broker in a
// container listens on every interface but must be reached by its service
// name.
type advertisedListener struct {
	net.Listener
	addr advertisedAddr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

type advertisedAddr string

func (advertisedAddr) Network() string  { return "tcp" }
func (a advertisedAddr) String() string { return string(a) }

// listenFn listens on host instead of kfake's 127.0.0.1 and, when advertise
// is set, names that host to clients, with the port listened on.
func listenFn(host, advertise string) func(network, address string) (net.Listener, error) {
	return func(network, address string) (net.Listener, error) {
		_, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, fmt.Errorf("kfake's listen address %q: %w", address, err)
		}
		ln, err := net.Listen(network, net.JoinHostPort(host, port))
		if err != nil {
			return nil, err
		}
		if advertise == "" {
			return ln, nil
		}
		_, bound, _ := net.SplitHostPort(ln.Addr().String())
		return advertisedListener{Listener: ln, addr: advertisedAddr(net.JoinHostPort(advertise, bound))}, nil
	}
}

// probeAPIVersions asks the broker at addr for its API versions, as
// Kafka's kafka-broker-api-versions.sh does, and reports how many it
// serves: the container's health check.
func probeAPIVersions(ctx context.Context, addr string, transport kafka.RoundTripper) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(addr), Transport: transport}
	res, err := client.ApiVersions(ctx, &kafka.ApiVersionsRequest{})
	if err != nil {
		return fmt.Errorf("api versions of %s: %w", addr, err)
	}
	if res.Error != nil {
		return fmt.Errorf("api versions of %s: %w", addr, res.Error)
	}
	fmt.Fprintln(os.Stdout, addr+": "+strconv.Itoa(len(res.ApiKeys))+" APIs")
	return nil
}
