package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/internal/loadgen"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// drained is a consumer's drain of the topic into one ClickHouse target.
type drained struct {
	phase
	// servers is the CPU the target's servers used per 100k rows; of it,
	// zooKeeper is ZooKeeper's.
	servers, zooKeeper float64
	// last is the share of the last of the servers measured.
	last float64
}

// compareCluster drains the pre-filled topic twice more, each time with a
// consumer group of its own: into a database of the single server, then
// into a 2×2 cluster on the same machine, and reports both.
func (r *rig) compareCluster(ctx context.Context, events, batchRows int) error {
	r.log.Info("cluster comparison: draining the topic into one server")
	single, err := r.drain(ctx, events, batchRows, "single", chstore.Config{Addrs: []string{r.ch.Addr()}, Database: "single"}, []int{r.ch.PID()})
	if err != nil {
		return err
	}
	r.log.Info("cluster comparison: starting a 2×2 ClickHouse cluster with ZooKeeper")
	if err := devclickhouse.InstallZooKeeper(ctx, os.Stderr); err != nil {
		return err
	}
	dir := filepath.Join(r.dir, "cluster")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	c, err := devclickhouse.StartCluster(ctx, devclickhouse.ClusterOptions{Dir: dir})
	if err != nil {
		return err
	}
	defer c.Stop()
	var pids []int
	for _, s := range c.Servers() {
		pids = append(pids, s.PID())
	}
	// ZooKeeper last: drain reports its share.
	pids = append(pids, c.ZooKeeper.PID())
	r.log.Info("cluster comparison: draining the topic into the cluster")
	clu, err := r.drain(ctx, events, batchRows, "cluster", chstore.Config{Addrs: c.Addrs(), Database: "bench", Cluster: c.Name}, pids)
	if err != nil {
		return err
	}
	clu.zooKeeper = clu.last
	fmt.Printf("\nThe same %d events drained by the consumer into one ClickHouse 18.16 server and into a 2×2 cluster (4 servers and ZooKeeper) on this %d-core machine:\n\n",
		events, runtime.NumCPU())
	fmt.Println("| target | rows/s | consumer CPU s / 100k rows | servers' CPU s / 100k rows | of which ZooKeeper |")
	fmt.Println("|---|---:|---:|---:|---:|")
	for _, d := range []struct {
		name string
		d    drained
	}{{"one server", single}, {"2×2 cluster, through the Distributed table", clu}} {
		fmt.Printf("| %s | %.0f | %.2f | %.2f | %.2f |\n", d.name, d.d.rate(), d.d.usage.CPUPer100k, d.d.servers, d.d.zooKeeper)
	}
	fmt.Printf("\ncluster / one server: %.2f× the rows/s\n", clu.rate()/single.rate())
	return nil
}

// drain runs a consumer of a new group into cfg until every pre-filled
// event is a row there, measuring from its first row to the last.
func (r *rig) drain(ctx context.Context, n, batchRows int, group string, cfg chstore.Config, servers []int) (drained, error) {
	cfg.StringColumns = r.columns
	s, err := chstore.Open(ctx, cfg)
	if err != nil {
		return drained{}, err
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		return drained{}, err
	}
	env := []string{"CLICKHOUSE_ADDR=" + strings.Join(cfg.Addrs, ","), "CLICKHOUSE_DATABASE=" + cfg.Database, "CLICKHOUSE_CLUSTER=" + cfg.Cluster,
		"CONSUMER_GROUP=bench-" + group, "BATCH_ROWS=" + strconv.Itoa(batchRows)}
	cmd, _, err := r.service(ctx, "consumer", env...)
	if err != nil {
		return drained{}, err
	}
	defer stopCmd(cmd)
	count := func() uint64 {
		var c uint64
		_ = s.Conn().QueryRow(s.Context(ctx), "SELECT count() FROM `"+cfg.Database+"`.events").Scan(&c)
		return c
	}
	for count() == 0 {
		if ctx.Err() != nil {
			return drained{}, ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
	first, start := count(), time.Now()
	meter, err := loadgen.StartMeter(cmd.PID())
	if err != nil {
		return drained{}, err
	}
	serverMeters := make([]*loadgen.Meter, len(servers))
	for i, pid := range servers {
		if serverMeters[i], err = loadgen.StartMeter(pid); err != nil {
			return drained{}, err
		}
	}
	for count() < uint64(n) {
		if ctx.Err() != nil {
			return drained{}, ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(start)
	rows := int64(uint64(n) - first)
	u, err := meter.Stop(rows)
	if err != nil {
		return drained{}, err
	}
	d := drained{phase: phase{rows: int(rows), elapsed: elapsed, usage: u}}
	for _, m := range serverMeters {
		su, err := m.Stop(rows)
		if err != nil {
			return drained{}, err
		}
		d.servers += su.CPUPer100k
		d.last = su.CPUPer100k
	}
	return d, nil
}
