package devclickhouse

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// TestClusterReplicatesAndDistributes runs DDL on the whole cluster,
// writes through a Distributed table and reads every row back from each
// shard's replicas.
func TestClusterReplicatesAndDistributes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := StartClusterForTest(t)
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{c.Shards[0][0].Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		"CREATE TABLE t_local ON CLUSTER " + c.Name + " (x UInt32) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/default/t_local', '{replica}') ORDER BY x",
		"CREATE TABLE t ON CLUSTER " + c.Name + " AS t_local ENGINE = Distributed(" + c.Name + ", default, t_local, x)",
	} {
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	b, err := conn.PrepareBatch(clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"insert_distributed_sync": 1})), "INSERT INTO t (x)")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := b.Append(uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	// Rows with an even x go to the first shard, odd ones to the second;
	// both replicas of a shard hold its rows once synced.
	if err := c.SyncReplicas(ctx, "default.t_local"); err != nil {
		t.Fatal(err)
	}
	for i, shard := range c.Shards {
		for j, s := range shard {
			sc, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr()}})
			if err != nil {
				t.Fatal(err)
			}
			var n uint64
			if err := sc.QueryRow(ctx, fmt.Sprintf("SELECT count() FROM t_local WHERE x %% 2 = %d", i)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			var all uint64
			if err := sc.QueryRow(ctx, "SELECT count() FROM t").Scan(&all); err != nil {
				t.Fatal(err)
			}
			sc.Close()
			if n != 50 || all != 100 {
				t.Errorf("%s: %d rows of its shard in t_local (want 50), %d in t (want 100)", ReplicaName(i, j), n, all)
			}
		}
	}
}
