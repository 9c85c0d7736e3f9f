package devclickhouse

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/assistantcms/cms/internal/testcert"
)

func TestServerStartsAnswersAndRestarts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := StartForTest(t)
	query := func() string {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr()}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var v string
		if err := conn.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "CREATE TABLE kept (x UInt8) ENGINE = MergeTree ORDER BY x"); err != nil {
		t.Fatal(err)
	}
	// Inserts go through batches: the 18.16 server does not answer an
	// INSERT ... VALUES sent as a plain query over the native protocol.
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO kept (x)")
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Append(uint8(7)); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if v := query(); v == "" {
		t.Fatal("empty version")
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err = clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var x uint8
	if err := conn.QueryRow(ctx, "SELECT x FROM kept").Scan(&x); err != nil || x != 7 {
		t.Errorf("data after restart: %d %v", x, err)
	}
}

func TestSecurePortServesTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	files, err := testcert.Write(dir, "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	s := StartForTestWith(t, Options{TLS: &TLS{CertFile: files.ServerCert, KeyFile: files.ServerKey}})
	if s.SecureAddr() == "" || s.SecureAddr() == s.Addr() {
		t.Fatalf("secure address %q beside %q", s.SecureAddr(), s.Addr())
	}
	caPEM, err := os.ReadFile(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.SecureAddr()}, TLS: &tls.Config{RootCAs: roots}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var one uint8
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("query over TLS: %d %v", one, err)
	}
}

func TestAddressInUse(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("clickhouse-server exited during start-up: ...\n<Error> Application: Net Exception: Address already in use: 127.0.0.1:36915"), true},
		{errors.New("clickhouse-server exited during start-up: Code: 76, Cannot open file"), false},
	} {
		if got := addressInUse(tc.err); got != tc.want {
			t.Errorf("addressInUse(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
