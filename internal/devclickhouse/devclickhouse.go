// Package devclickhouse runs a private ClickHouse server for tests and the
// local stack: Debian's clickhouse-server with a project-owned
// configuration, loopback ports and its own data directory. It is never
// used in production.
package devclickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/debpkg"
)

// Packages are the Debian packages the server comes from.
const (
	serverPackage = "clickhouse-server"
	clientPackage = "clickhouse-client"
)

// binaries are where clickhouse-server may be.
func binaries() []string {
	return []string{"clickhouse-server", "/usr/bin/clickhouse-server", "/usr/sbin/clickhouse-server"}
}

// Binary returns the path of clickhouse-server, or an error saying how to
// install it.
func Binary() (string, error) {
	p, err := debpkg.Find(binaries()...)
	if err != nil {
		return "", fmt.Errorf("%w (apt-get install %s %s)", err, serverPackage, clientPackage)
	}
	return p, nil
}

// Packages are the Debian packages of the server and its client.
func Packages() []string { return []string{serverPackage, clientPackage} }

// Install installs the server and client with apt when they are missing.
// It needs root; out is where apt's output goes.
func Install(ctx context.Context, out io.Writer) error {
	_, err := debpkg.Ensure(ctx, out, binaries(), serverPackage, clientPackage)
	return err
}

// Options configure Start.
type Options struct {
	// Dir holds the configuration, data and logs; it must exist.
	Dir string
	// TCPPort is the native protocol port; 0 picks a free one.
	TCPPort int
	// Log receives the server's stdout and stderr; nil discards them.
	Log io.Writer
	// Config is XML added inside the configuration's root element: the
	// remote_servers, zookeeper, macros and distributed_ddl sections of a
	// cluster member (see StartCluster).
	Config string
	// InterserverHTTPPort is where replicas fetch parts from this server;
	// 0 leaves replication without it (a server outside a cluster).
	InterserverHTTPPort int
	// ProfileSettings is XML added to the default settings profile, which
	// also applies to the DDL a cluster runs ON CLUSTER.
	ProfileSettings string
	// TLS, when set, also serves the native protocol over TLS on
	// SecureTCPPort with this certificate; clients are not asked for one.
	TLS *TLS
}

// TLS is the server's certificate for the secure native port.
type TLS struct {
	// CertFile and KeyFile are PEM files.
	CertFile, KeyFile string
	// SecureTCPPort is the port; 0 picks a free one.
	SecureTCPPort int
}

// Server is a running private ClickHouse server.
type Server struct {
	bin  string
	o    Options
	proc childproc.Slot
}

// Start writes the configuration and starts the server, waiting until it
// answers queries.
//
// A port left to choose is chosen free, then bound by the server a moment
// later; if another process took it in between, the start is tried again
// with another.
func Start(ctx context.Context, o Options) (*Server, error) {
	for attempt := 1; ; attempt++ {
		s, err := start(ctx, o)
		portsChosen := o.TCPPort == 0 && (o.TLS == nil || o.TLS.SecureTCPPort == 0)
		if err == nil || attempt == startAttempts || !portsChosen || !addressInUse(err) {
			return s, err
		}
	}
}

// startAttempts bounds the starts tried when a chosen port was taken.
const startAttempts = 3

// addressInUse reports whether a server failed to start because an
// address it was to listen on was taken (its error log says so).
func addressInUse(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Address already in use")
}

func start(ctx context.Context, o Options) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if o.TCPPort == 0 {
		if o.TCPPort, err = childproc.FreePort(); err != nil {
			return nil, err
		}
	}
	if o.TLS != nil {
		t := *o.TLS
		if t.SecureTCPPort == 0 {
			if t.SecureTCPPort, err = childproc.FreePort(); err != nil {
				return nil, err
			}
		}
		o.TLS = &t
	}
	s := &Server{bin: bin, o: o}
	if err := s.writeConfig(); err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Addr is the native protocol address.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.o.TCPPort) }

// SecureAddr is the native protocol address over TLS, or "" without TLS.
func (s *Server) SecureAddr() string {
	if s.o.TLS == nil {
		return ""
	}
	return "127.0.0.1:" + strconv.Itoa(s.o.TLS.SecureTCPPort)
}

// secureConfig is the configuration of the secure port: the 18.16 server
// reads the certificate from openSSL.server. It needs no dhParamsFile:
// Go clients negotiate ECDHE with the system OpenSSL.
func (s *Server) secureConfig() string {
	if s.o.TLS == nil {
		return ""
	}
	return fmt.Sprintf(`
    <tcp_port_secure>%d</tcp_port_secure>
    <openSSL>
        <server>
            <certificateFile>%s</certificateFile>
            <privateKeyFile>%s</privateKeyFile>
            <verificationMode>none</verificationMode>
            <loadDefaultCAFile>false</loadDefaultCAFile>
            <cacheSessions>true</cacheSessions>
            <disableProtocols>sslv2,sslv3</disableProtocols>
            <preferServerCiphers>true</preferServerCiphers>
        </server>
    </openSSL>`, s.o.TLS.SecureTCPPort, s.o.TLS.CertFile, s.o.TLS.KeyFile)
}

func (s *Server) writeConfig() error {
	dir, err := filepath.Abs(s.o.Dir)
	if err != nil {
		return err
	}
	s.o.Dir = dir
	for _, sub := range []string{"data", "tmp", "user_files", "format_schemas", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return fmt.Errorf("create ClickHouse directory: %w", err)
		}
	}
	httpPort, err := childproc.FreePort()
	if err != nil {
		return err
	}
	// The <yandex> root element is what the 18.16 server reads; newer
	// servers accept it too.
	config := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>%[1]s/logs/server.log</log>
        <errorlog>%[1]s/logs/error.log</errorlog>
        <size>10M</size>
        <count>1</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>%[2]d</tcp_port>
    <http_port>%[3]d</http_port>
    <path>%[1]s/data/</path>
    <tmp_path>%[1]s/tmp/</tmp_path>
    <user_files_path>%[1]s/user_files/</user_files_path>
    <format_schema_path>%[1]s/format_schemas/</format_schema_path>
    <users_config>%[1]s/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>268435456</mark_cache_size>
    <max_concurrent_queries>100</max_concurrent_queries>%[4]s
</yandex>
`, dir, s.o.TCPPort, httpPort, s.secureConfig())
	config = strings.Replace(config, "</yandex>", s.clusterConfig()+"</yandex>", 1)
	users := `<?xml version="1.0"?>
<yandex>
    <profiles><default><max_memory_usage>4000000000</max_memory_usage></default></profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
        <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`
	if err := os.WriteFile(filepath.Join(dir, "config.xml"), []byte(config), 0o644); err != nil {
		return fmt.Errorf("write ClickHouse config: %w", err)
	}
	users = strings.Replace(users, "</default></profiles>", s.o.ProfileSettings+"</default></profiles>", 1)
	if err := os.WriteFile(filepath.Join(dir, "users.xml"), []byte(users), 0o644); err != nil {
		return fmt.Errorf("write ClickHouse users: %w", err)
	}
	return nil
}

// Start (re)starts a stopped server on the same port and data directory.
func (s *Server) Start(ctx context.Context) error {
	cmd := exec.Command(s.bin, "--config-file="+filepath.Join(s.o.Dir, "config.xml"))
	cmd.Dir = s.o.Dir
	cmd.Stdout, cmd.Stderr = s.o.Log, s.o.Log
	err := s.proc.Launch(ctx, "clickhouse-server", cmd, 60*time.Second, s.ping)
	if errors.Is(err, childproc.ErrExited) {
		return fmt.Errorf("%w; the end of %s/logs/error.log:\n%s", err, s.o.Dir, s.errorLogTail())
	}
	return err
}

func (s *Server) ping(ctx context.Context) error {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr()}, DialTimeout: time.Second})
	if err != nil {
		return err
	}
	defer conn.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return conn.Ping(pctx)
}

// PID of the running process, or 0.
func (s *Server) PID() int { return s.proc.PID() }

// ForceRestoreData makes the next start attach replicated tables whose
// local parts differ from ZooKeeper's, as after a SIGKILL in the middle of
// an insert: without it the server refuses to start when most of a small
// table's rows are such parts. The server moves them aside and fetches
// what it lacks from its replicas (the flag ClickHouse documents for it).
func (s *Server) ForceRestoreData() error {
	flags := filepath.Join(s.o.Dir, "data", "flags")
	if err := os.MkdirAll(flags, 0o755); err != nil {
		return fmt.Errorf("create ClickHouse flags directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(flags, "force_restore_data"), nil, 0o644); err != nil {
		return fmt.Errorf("set force_restore_data: %w", err)
	}
	return nil
}

// Stop ends the server with SIGTERM and waits; after 30 s it is killed.
func (s *Server) Stop() error { return s.proc.Signal(syscall.SIGTERM, 30*time.Second) }

// errorLogTail is the end of the server's error log, so that a failed
// start says why even once its directory is gone.
func (s *Server) errorLogTail() string {
	b, err := os.ReadFile(filepath.Join(s.o.Dir, "logs", "error.log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// Kill ends the server with SIGKILL.
func (s *Server) Kill() error { return s.proc.Signal(syscall.SIGKILL, 10*time.Second) }

// StartForTest starts a server for one test and stops it when the test
// ends. Without clickhouse-server the test fails, as every test must run;
// go run ./dev/test installs it.
func StartForTest(t testing.TB) *Server {
	t.Helper()
	return StartForTestWith(t, Options{})
}

// StartForTestWith is StartForTest with options; an empty Dir is the
// test's temporary directory.
func StartForTestWith(t testing.TB, o Options) *Server {
	t.Helper()
	if _, err := Binary(); err != nil {
		t.Fatalf("%v; go run ./dev/test installs it", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	s, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}
