// Command broker runs a single-node Kafka-protocol broker for local
// development and integration tests. Production runs Apache Kafka; this
// broker (franz-go's kfake) speaks the same wire protocol, optionally over
// TLS and with SASL authentication.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 9092, "port to listen on")
	host := flag.String("host", "127.0.0.1", "address to listen on: 0.0.0.0 in a container, which other containers reach")
	advertise := flag.String("advertise", "", "host clients are told to connect to (with the port listened on), such as the container's service name (empty: the address listened on)")
	probe := flag.String("api-versions", "", "do not serve: ask the broker at this HOST:PORT for its API versions and exit 0 if it answers (a container health check)")
	dataDir := flag.String("data-dir", "", "directory that keeps topics and offsets across restarts (empty: memory only)")
	syncWrites := flag.Bool("sync", false, "fsync every produced batch, so that nothing acknowledged is lost even if the machine goes down (batches are written before they are acknowledged, so a killed process loses nothing either way)")
	var sec security
	flag.StringVar(&sec.certFile, "tls-cert-file", "", "PEM certificate of the broker: with -tls-key-file, the broker speaks TLS only")
	flag.StringVar(&sec.keyFile, "tls-key-file", "", "PEM key of -tls-cert-file")
	flag.StringVar(&sec.clientCAFile, "tls-client-ca-file", "", "require clients to present a certificate signed by the authorities of this PEM file (which must also have signed -tls-cert-file)")
	flag.Func("sasl-user", "require SASL authentication and admit this user, as MECHANISM:USER:PASSWORD (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512); repeat for more users", sec.addUser)
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))

	opts := []kfake.Opt{kfake.Ports(*port), kfake.ClusterID("cms-local"), kfake.ListenFn(listenFn(*host, *advertise))}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
	}
	if *syncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	secOpts, transport, err := sec.options()
	if err != nil {
		log.Error("configure the broker's security", "err", err)
		os.Exit(2)
	}
	opts = append(opts, secOpts...)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *probe != "" {
		if err := probeAPIVersions(ctx, *probe, transport); err != nil {
			fmt.Fprintln(os.Stderr, err)
			stop()
			os.Exit(1) //nolint:gocritic // stop has run
		}
		return
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		log.Error("start broker", "err", err)
		os.Exit(1)
	}
	// Installed before the address is announced, so that it sees the joins.
	watch := newMemberWatch(log)
	watch.transport = transport
	watch.install(c)
	// On loopback: an advertised name need not resolve here.
	_, listenPort, _ := net.SplitHostPort(c.ListenAddrs()[0])
	go watch.run(ctx, c, net.JoinHostPort("127.0.0.1", listenPort), time.Second)
	// The address on stdout is the readiness signal for whoever started us.
	for _, addr := range c.ListenAddrs() {
		fmt.Println(addr)
	}
	log.Info("broker listening", "addrs", c.ListenAddrs(), "data_dir", *dataDir, "tls", sec.certFile != "",
		"client_certificates", sec.clientCAFile != "", "sasl_users", sec.userNames())

	<-ctx.Done()
	log.Info("broker stopping")
	c.Close()
}
