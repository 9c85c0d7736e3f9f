package chstore_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/devclickhouse"
	"github.com/assistantcms/cms/internal/loadgen"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/columns"
	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// BenchmarkInsertEvents inserts batches of the consumer's size, decoded
// from the REQUEST_RESPONSE envelopes of the load generator, into a
// ClickHouse server on loopback. The server's own work is not in a CPU
// profile of the benchmark, so the profile shows what the insert costs the
// consumer.
func BenchmarkInsertEvents(b *testing.B) {
	srv := devclickhouse.StartForTest(b)
	ctx := context.Background()
	s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{srv.Addr()}, Database: "bench", StringColumns: stringColumns})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	recs, err := loadgen.Records(loadgen.Bodies(loadgen.BodyOptions{AppID: "demo-app"}), event.Meta{AppID: "demo-app", OrganizationID: "demo-org", ReceivedAt: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	const rows = 20000
	var batch chstore.EventBatch
	var dec columns.Decoder
	for i := 0; batch.Len() < rows; i++ {
		for _, m := range recs[i%len(recs)] {
			if _, err := dec.Decode(m.Value, &batch); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	cpu := processCPU(b)
	for b.Loop() {
		if err := s.InsertEvents(ctx, &batch); err != nil {
			b.Fatal(err)
		}
	}
	// The wall time includes the server's work; the process's CPU time is
	// what the insert costs the consumer.
	b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/float64(b.N*batch.Len()), "cpu-ns/row")
}

// processCPU is the CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
