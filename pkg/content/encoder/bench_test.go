package encoder

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"syscall"
	"testing"
	"time"
)

const benchQuestion = "How can I change the email address associated with my account?"

// benchPassage returns a text of about n tokens, different for each seed.
func benchPassage(e *Encoder, seed, n int) string {
	words := strings.Fields("the service keeps a record of every order and sends a receipt by email " +
		"customers can return items within thirty days when the package is unopened and the refund " +
		"reaches the original payment method after the warehouse checks the parcel")
	var b strings.Builder
	for i := 0; e.Tokens(b.String()) < n-2; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[(seed*7+i*(seed%5+1))%len(words)])
	}
	fmt.Fprintf(&b, " %d", seed)
	return b.String()
}

func benchEmbed(b *testing.B, texts []string) {
	e := testEncoder(b)
	ctx := context.Background()
	if _, err := e.Embed(ctx, texts); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := e.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(texts)*b.N)/b.Elapsed().Seconds(), "texts/s")
	// CPU time as well as wall time: on a machine shared with other work
	// the wall time includes waiting for a core.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time of the process (all threads), in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func BenchmarkEmbedQuestion(b *testing.B) {
	benchEmbed(b, []string{benchQuestion})
}

func BenchmarkEmbedPassage128(b *testing.B) {
	e := testEncoder(b)
	text := benchPassage(e, 1, 140)
	if n := e.Tokens(text); n < window {
		b.Fatalf("passage has %d tokens", n)
	}
	benchEmbed(b, []string{text})
}

func BenchmarkEmbedBatch256x100(b *testing.B) {
	e := testEncoder(b)
	texts := make([]string, 256)
	for i := range texts {
		texts[i] = benchPassage(e, i, 100)
	}
	benchEmbed(b, texts)
}

func BenchmarkTokens(b *testing.B) {
	e := testEncoder(b)
	text := benchPassage(e, 1, 330) // a 250-word document
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		e.Tokens(text)
	}
}

// BenchmarkLoad reports the time of Load, the heap it keeps, the bytes it
// allocates in all and the peak of the live heap while it runs (sampled
// every 100µs).
func BenchmarkLoad(b *testing.B) {
	dir := testDir(b)
	var kept, total, peak float64
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	heap := func() float64 {
		metrics.Read(sample)
		return float64(sample[0].Value.Uint64())
	}
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		base := heap()
		done := make(chan struct{})
		peakc := make(chan float64)
		go func() {
			p := 0.0
			t := time.NewTicker(100 * time.Microsecond)
			defer t.Stop()
			for {
				p = max(p, heap()-base)
				select {
				case <-done:
					peakc <- p
					return
				case <-t.C:
				}
			}
		}()
		e, err := Load(dir)
		close(done)
		p := <-peakc
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		kept += float64(after.HeapAlloc) - float64(before.HeapAlloc)
		total += float64(after.TotalAlloc - before.TotalAlloc)
		peak = max(peak, p)
		runtime.KeepAlive(e)
	}
	b.ReportMetric(kept/float64(b.N)/(1<<20), "MiB-kept")
	b.ReportMetric(total/float64(b.N)/(1<<20), "MiB-allocated")
	b.ReportMetric(peak/(1<<20), "MiB-peak")
}
