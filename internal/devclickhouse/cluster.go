package devclickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/assistantcms/cms/internal/childproc"
)

// ClusterOptions configure StartCluster.
type ClusterOptions struct {
	// Dir holds every member's configuration and data; it must exist.
	Dir string
	// Name is the cluster's name in remote_servers; empty means "cms".
	Name string
	// Shards and Replicas size the cluster; zero means 2 of each.
	Shards, Replicas int
	// Log receives every server's output; nil discards it.
	Log io.Writer
}

// Cluster is a running ClickHouse cluster on loopback: shards of
// replicated servers coordinated by one ZooKeeper.
type Cluster struct {
	// Name is the cluster's name in remote_servers, as ON CLUSTER and
	// Distributed tables name it.
	Name      string
	ZooKeeper *ZooKeeper
	// Shards holds the servers: Shards[i][j] is replica j of shard i.
	Shards [][]*Server
}

// profileSettings allow LowCardinality columns on servers before 19.9 for
// every query, as the DDL a cluster runs ON CLUSTER needs: it runs with the
// default profile's settings, not with the settings of the query that
// queued it.
//
// events and quarantine are sharded alike, by event ID, so a subquery over
// one of them, as in "quarantined events not in events", finds its rows on
// the shard it runs on: distributed_product_mode local lets analysts'
// queries say so.
//
// The members hold idle connections to each other, which a stopping
// server waits for until it next polls them: every second rather than 10.
const profileSettings = "<allow_experimental_low_cardinality_type>1</allow_experimental_low_cardinality_type>" +
	"<distributed_product_mode>local</distributed_product_mode><poll_interval>1</poll_interval>"

// DDLPath is the ZooKeeper path of the cluster's distributed DDL queue.
const DDLPath = "/clickhouse/task_queue/ddl"

// StartCluster starts ZooKeeper and every server, each on free loopback
// ports, with the macros {shard} (1, 2, ...) and {replica} (s1r1, s1r2,
// ...: unique in the cluster, as host names are) set on each server.
//
// Ports are chosen free, then bound by the servers a moment later, and
// another process may take one in between: a start that fails on an
// address in use is tried again, with other ports, in a new directory.
func StartCluster(ctx context.Context, o ClusterOptions) (*Cluster, error) {
	dir := o.Dir
	for attempt := 1; ; attempt++ {
		c, err := startCluster(ctx, o)
		if err == nil || attempt == startAttempts || !addressInUse(err) {
			return c, err
		}
		o.Dir = filepath.Join(dir, fmt.Sprintf("attempt%d", attempt+1))
	}
}

func startCluster(ctx context.Context, o ClusterOptions) (c *Cluster, err error) {
	if o.Name == "" {
		o.Name = "cms"
	}
	if o.Shards <= 0 {
		o.Shards = 2
	}
	if o.Replicas <= 0 {
		o.Replicas = 2
	}
	if _, err := Binary(); err != nil {
		return nil, err
	}
	zkDir := filepath.Join(o.Dir, "zookeeper")
	if err := os.MkdirAll(zkDir, 0o755); err != nil {
		return nil, fmt.Errorf("create ZooKeeper directory: %w", err)
	}
	c = &Cluster{Name: o.Name}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	if c.ZooKeeper, err = StartZooKeeper(ctx, ZooKeeperOptions{Dir: zkDir, Log: o.Log}); err != nil {
		return c, err
	}
	// Every server's configuration names every other's port, so all
	// ports are chosen first.
	type member struct{ tcp, interserver int }
	free, err := childproc.FreePorts(2 * o.Shards * o.Replicas)
	if err != nil {
		return c, err
	}
	members := make([][]member, o.Shards)
	for i := range members {
		members[i] = make([]member, o.Replicas)
		for j := range members[i] {
			members[i][j], free = member{tcp: free[0], interserver: free[1]}, free[2:]
		}
	}
	var remote strings.Builder
	fmt.Fprintf(&remote, "<remote_servers><%s>", o.Name)
	for i := range members {
		remote.WriteString("<shard><internal_replication>true</internal_replication>")
		for _, m := range members[i] {
			fmt.Fprintf(&remote, "<replica><host>127.0.0.1</host><port>%d</port></replica>", m.tcp)
		}
		remote.WriteString("</shard>")
	}
	fmt.Fprintf(&remote, "</%s></remote_servers>\n", o.Name)
	zk := fmt.Sprintf("<zookeeper><node><host>127.0.0.1</host><port>%d</port></node><session_timeout_ms>10000</session_timeout_ms></zookeeper>\n"+
		"<distributed_ddl><path>%s</path></distributed_ddl>\n", c.ZooKeeper.Port(), DDLPath)

	c.Shards = make([][]*Server, o.Shards)
	var wg sync.WaitGroup
	errs := make([]error, o.Shards*o.Replicas)
	for i := range members {
		c.Shards[i] = make([]*Server, o.Replicas)
		for j, m := range members[i] {
			dir := filepath.Join(o.Dir, fmt.Sprintf("s%dr%d", i+1, j+1))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return c, fmt.Errorf("create ClickHouse directory: %w", err)
			}
			macros := fmt.Sprintf("<macros><shard>%d</shard><replica>%s</replica></macros>\n", i+1, ReplicaName(i, j))
			// Started side by side: each server takes a few seconds.
			wg.Go(func() {
				s, err := Start(ctx, Options{Dir: dir, TCPPort: m.tcp, InterserverHTTPPort: m.interserver, Log: o.Log,
					Config: remote.String() + zk + macros, ProfileSettings: profileSettings})
				c.Shards[i][j], errs[i*o.Replicas+j] = s, err
			})
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	// A server takes queries before its ZooKeeper session is up, and the
	// 18.16 server crashes on distributed DDL sent in that moment.
	for _, s := range c.Servers() {
		if err := s.waitZooKeeper(ctx); err != nil {
			return c, err
		}
	}
	return c, nil
}

// waitZooKeeper waits until the server reads from ZooKeeper.
func (s *Server) waitZooKeeper(ctx context.Context) error {
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr()}, DialTimeout: time.Second})
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n uint64
		err := conn.QueryRow(ctx, "SELECT count() FROM system.zookeeper WHERE path = '/'").Scan(&n)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ClickHouse %s not reading ZooKeeper after 60s: %w", s.Addr(), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// clusterConfig is the part of a server's configuration that makes it a
// cluster member.
func (s *Server) clusterConfig() string {
	var b strings.Builder
	if s.o.InterserverHTTPPort != 0 {
		fmt.Fprintf(&b, "    <interserver_http_port>%d</interserver_http_port>\n"+
			"    <interserver_http_host>127.0.0.1</interserver_http_host>\n", s.o.InterserverHTTPPort)
	}
	if s.o.Config != "" {
		b.WriteString(s.o.Config)
	}
	return b.String()
}

// Servers returns every server, shard after shard.
func (c *Cluster) Servers() []*Server {
	var out []*Server
	for _, shard := range c.Shards {
		out = append(out, shard...)
	}
	return out
}

// Addrs returns every server's native protocol address, shard after
// shard.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.Servers() {
		out = append(out, s.Addr())
	}
	return out
}

// SyncReplicas waits until every server holds every part its shard's
// other replicas have of the tables named ("db.table"): replication is
// asynchronous, so a read may otherwise meet a replica that has not yet
// fetched a new part. 18.16's SYSTEM SYNC REPLICA empties the replica's
// queue but does not first pull log entries the replica has not seen, so
// each replica is also watched until it has pulled the whole log.
func (c *Cluster) SyncReplicas(ctx context.Context, tables ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, s := range c.Servers() {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr()}})
		if err != nil {
			return err
		}
		err = syncReplica(ctx, conn, tables)
		conn.Close()
		if err != nil {
			return fmt.Errorf("sync replicas on %s: %w", s.Addr(), err)
		}
	}
	return nil
}

func syncReplica(ctx context.Context, conn driver.Conn, tables []string) error {
	for _, t := range tables {
		db, table, ok := strings.Cut(t, ".")
		if !ok {
			return fmt.Errorf("table %q: want db.table", t)
		}
		for {
			var pointer, maxIndex uint64
			var queue uint32
			err := conn.QueryRow(ctx, "SELECT log_pointer, log_max_index, queue_size FROM system.replicas WHERE database = ? AND table = ?", db, table).
				Scan(&pointer, &maxIndex, &queue)
			if err != nil {
				return fmt.Errorf("read the replication state of %s: %w", t, err)
			}
			// log_pointer is the next log entry to pull; an empty log
			// has both at 0.
			if queue == 0 && (pointer > maxIndex || pointer == 0 && maxIndex == 0) {
				break
			}
			if err := conn.Exec(ctx, "SYSTEM SYNC REPLICA "+t); err != nil {
				return fmt.Errorf("sync replica %s: %w", t, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s still behind (log pointer %d, last entry %d, queue %d): %w", t, pointer, maxIndex, queue, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
		if err := conn.Exec(ctx, "SYSTEM SYNC REPLICA "+t); err != nil {
			return fmt.Errorf("sync replica %s: %w", t, err)
		}
	}
	return nil
}

// Stop stops every server, then ZooKeeper.
func (c *Cluster) Stop() error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, s := range c.Servers() {
		if s == nil {
			continue
		}
		wg.Go(func() {
			if err := s.Stop(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("stop ClickHouse %s: %w", s.Addr(), err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if c.ZooKeeper != nil {
		if err := c.ZooKeeper.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop ZooKeeper: %w", err))
		}
	}
	return errors.Join(errs...)
}

// StartClusterForTest starts a 2×2 cluster for one test and stops it when
// the test ends. Without clickhouse-server or ZooKeeper the test fails, as
// every test must run; go run ./dev/test installs them.
func StartClusterForTest(t testing.TB) *Cluster {
	t.Helper()
	_, err1 := Binary()
	_, err2 := zooKeeperFind()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("%v; go run ./dev/test installs them", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := StartCluster(ctx, ClusterOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

// ReplicaName is the {replica} macro of replica j (from 0) of shard i
// (from 0).
func ReplicaName(shard, replica int) string {
	return "s" + strconv.Itoa(shard+1) + "r" + strconv.Itoa(replica+1)
}
