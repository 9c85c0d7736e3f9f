package chstore_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/internal/loadgen"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/columns"
	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// serverCPU is the CPU time the processes have used, from /proc.
func serverCPU(b *testing.B, pids ...int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			b.Fatal(err)
		}
		// Fields after the command, which is in parentheses: utime and
		// stime are the 12th and 13th, in clock ticks of 10 ms.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		for _, s := range f[11:13] {
			ticks, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			total += time.Duration(ticks) * 10 * time.Millisecond
		}
	}
	return total
}

// BenchmarkClusterInsert compares the ways of writing the consumer's
// batches: to one server, through a 2×2 cluster's Distributed table with
// insert_distributed_sync (what the consumer does), and to the cluster's
// shard-local tables directly, the batch split by the sharding key and
// each part sent to a replica of its shard at once. Besides rows/s it
// reports the CPU per row of the client and of the servers (ClickHouse,
// and for the cluster ZooKeeper too), with replication: each round waits
// until every replica holds what was written.
//
//	go test -run '^$' -bench BenchmarkClusterInsert -benchtime 20x -count 5 ./pkg/pipeline/chstore
func BenchmarkClusterInsert(b *testing.B) {
	single := devclickhouse.StartForTest(b)
	c := devclickhouse.StartClusterForTest(b)
	ctx := context.Background()
	open := func(addrs []string, cluster string) *chstore.Store {
		s, err := chstore.Open(ctx, chstore.Config{Addrs: addrs, Database: "bench", Cluster: cluster, StringColumns: stringColumns})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}
	ss, cs := open([]string{single.Addr()}, ""), open(c.Addrs(), c.Name)
	for _, s := range []*chstore.Store{ss, cs} {
		if _, err := s.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
	}
	// The shard-local writer connects to a replica of each shard; its
	// statements are the plain ones of one server.
	locals := make([]*chstore.Store, len(c.Shards))
	for i, shard := range c.Shards {
		locals[i] = open([]string{shard[0].Addr(), shard[1].Addr()}, "")
	}

	recs, err := loadgen.Records(loadgen.Bodies(loadgen.BodyOptions{AppID: "demo-app"}), event.Meta{AppID: "demo-app", OrganizationID: "demo-org", ReceivedAt: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	const rows = 20000
	var all chstore.EventBatch
	parts := make([]chstore.EventBatch, len(c.Shards))
	var dec columns.Decoder
	for i := 0; all.Len() < rows; i++ {
		for _, m := range recs[i%len(recs)] {
			if _, err := dec.Decode(m.Value, &all); err != nil {
				b.Fatal(err)
			}
			if _, err := dec.Decode(m.Value, &parts[shardOf(all.EventID[all.Len()-1], len(parts))]); err != nil {
				b.Fatal(err)
			}
		}
	}
	var clusterPIDs []int
	for _, s := range c.Servers() {
		clusterPIDs = append(clusterPIDs, s.PID())
	}
	clusterPIDs = append(clusterPIDs, c.ZooKeeper.PID())
	syncCluster := func() {
		if err := c.SyncReplicas(ctx, "bench.events_local", "bench.query_counts_daily_local"); err != nil {
			b.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name   string
		pids   []int
		insert func() error
		sync   func()
	}{
		{"single", []int{single.PID()}, func() error { return ss.InsertEvents(ctx, &all) }, func() {}},
		{"distributed", clusterPIDs, func() error { return cs.InsertEvents(ctx, &all) }, syncCluster},
		{"shard-local", clusterPIDs, func() error {
			errs := make([]error, len(parts))
			var wg sync.WaitGroup
			for i := range parts {
				wg.Go(func() { errs[i] = chstore.InsertEventsInto(locals[i], ctx, "events_local", &parts[i]) })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return err
				}
			}
			return nil
		}, syncCluster},
	} {
		b.Run(tc.name, func(b *testing.B) {
			client, server, start := processCPU(b), serverCPU(b, tc.pids...), time.Now()
			for range b.N {
				if err := tc.insert(); err != nil {
					b.Fatal(err)
				}
			}
			tc.sync()
			elapsed := time.Since(start)
			n := float64(b.N * rows)
			b.ReportMetric(n/elapsed.Seconds(), "rows/s")
			b.ReportMetric(float64((processCPU(b)-client).Nanoseconds())/n, "client-cpu-ns/row")
			b.ReportMetric(float64((serverCPU(b, tc.pids...)-server).Nanoseconds())/n, "server-cpu-ns/row")
		})
	}
}
