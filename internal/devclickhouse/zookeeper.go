package devclickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/debpkg"
)

// zooKeeperPackage is the Debian package ZooKeeper comes from. It lays
// the server out as /usr/share/java/zookeeper.jar, whose manifest names
// the jars it depends on, so that jar alone is the classpath.
const zooKeeperPackage = "zookeeper"

// zooKeeperJar is the Debian package's server jar.
const zooKeeperJar = "/usr/share/java/zookeeper.jar"

// slf4jSimple, when there, gives ZooKeeper's logging somewhere to go;
// without a binding it logs nothing, which is fine too.
const slf4jSimple = "/usr/share/java/slf4j-simple.jar"

// zooKeeperFind returns java's path when both java and the ZooKeeper jar
// are installed.
func zooKeeperFind() (string, error) {
	if _, err := os.Stat(zooKeeperJar); err != nil {
		return "", fmt.Errorf("ZooKeeper is not installed (%s: %w)", zooKeeperJar, err)
	}
	return debpkg.Find("java", "/usr/bin/java")
}

// InstallZooKeeper installs Debian's ZooKeeper with apt when it is
// missing. It needs root; out is where apt's output goes.
func InstallZooKeeper(ctx context.Context, out io.Writer) error {
	_, err := debpkg.EnsureFound(ctx, out, zooKeeperFind, zooKeeperPackage)
	return err
}

// ZooKeeperOptions configure StartZooKeeper.
type ZooKeeperOptions struct {
	// Dir holds the configuration and data; it must exist.
	Dir string
	// ClientPort is the loopback port clients connect to; 0 picks one.
	ClientPort int
	// Log receives the server's output; nil discards it.
	Log io.Writer
}

// ZooKeeper is a running standalone ZooKeeper server.
type ZooKeeper struct {
	java string
	o    ZooKeeperOptions
	proc childproc.Slot
}

// StartZooKeeper writes a configuration and starts ZooKeeper, waiting
// until it answers.
func StartZooKeeper(ctx context.Context, o ZooKeeperOptions) (*ZooKeeper, error) {
	java, err := zooKeeperFind()
	if err != nil {
		return nil, fmt.Errorf("%w (apt-get install %s)", err, zooKeeperPackage)
	}
	if o.ClientPort == 0 {
		if o.ClientPort, err = childproc.FreePort(); err != nil {
			return nil, err
		}
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "data"), 0o755); err != nil {
		return nil, fmt.Errorf("create ZooKeeper data directory: %w", err)
	}
	// A short tick keeps session and sync timeouts short in tests; the
	// admin server (an HTTP port of its own) is not needed.
	cfg := fmt.Sprintf(`tickTime=500
initLimit=10
syncLimit=5
dataDir=%s/data
clientPort=%d
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr
`, o.Dir, o.ClientPort)
	if err := os.WriteFile(filepath.Join(o.Dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("write ZooKeeper config: %w", err)
	}
	z := &ZooKeeper{java: java, o: o}
	if err := z.Start(ctx); err != nil {
		return nil, err
	}
	return z, nil
}

// Addr is the client address.
func (z *ZooKeeper) Addr() string { return "127.0.0.1:" + strconv.Itoa(z.o.ClientPort) }

// Port is the client port.
func (z *ZooKeeper) Port() int { return z.o.ClientPort }

// Start (re)starts a stopped server on the same port and data.
func (z *ZooKeeper) Start(ctx context.Context) error {
	cp := z.o.Dir + ":" + zooKeeperJar
	if _, err := os.Stat(slf4jSimple); err == nil {
		cp += ":" + slf4jSimple
	}
	cmd := exec.Command(z.java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dzookeeper.admin.enableServer=false",
		"-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(z.o.Dir, "zoo.cfg"))
	cmd.Dir = z.o.Dir
	cmd.Stdout, cmd.Stderr = z.o.Log, z.o.Log
	return z.proc.Launch(ctx, "zookeeper", cmd, 60*time.Second, func(context.Context) error { return z.serving() })
}

// serving asks the server for its status with the four-letter command
// srvr: it answers ruok before it serves requests, srvr only once it does.
func (z *ZooKeeper) serving() error {
	c, err := net.DialTimeout("tcp", z.Addr(), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), "Mode: ") {
		return errors.New("zookeeper answered srvr with " + strconv.Quote(string(b)))
	}
	return nil
}

// PID of the running process, or 0.
func (z *ZooKeeper) PID() int { return z.proc.PID() }

// Stop ends the server with SIGTERM and waits; after 30 s it is killed.
func (z *ZooKeeper) Stop() error { return z.proc.Signal(syscall.SIGTERM, 30*time.Second) }

// Kill ends the server with SIGKILL.
func (z *ZooKeeper) Kill() error { return z.proc.Signal(syscall.SIGKILL, 10*time.Second) }
