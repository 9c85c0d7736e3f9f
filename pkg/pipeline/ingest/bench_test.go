package ingest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/assistantcms/cms/internal/loadgen"
)

// BenchmarkServeHTTP runs the handler on the benchmark's request bodies
// with a publisher that stores nothing: what a request costs besides the
// HTTP server and the producer.
func BenchmarkServeHTTP(b *testing.B) {
	h, _ := newTestHandler(&blockingPublisher{}, Config{})
	bodies := loadgen.Bodies(loadgen.BodyOptions{Count: 20, AppID: "a1", Seed: 1})
	var size int
	for _, body := range bodies {
		size += len(body)
	}
	b.SetBytes(int64(size / len(bodies)))
	b.ReportAllocs()
	rec := httptest.NewRecorder()
	i := 0
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPut, "/cms/app/events", bytes.NewReader(bodies[i%len(bodies)]))
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("Content-Type", "application/json")
		rec.Body.Reset()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*loadgen.DefaultBatch), "ns/event")
}

// BenchmarkServeHTTPParallel is BenchmarkServeHTTP with requests in
// flight on every processor at once, on as many distinct bodies as the
// load generator sends, so that they compete for the caches as they do
// under load.
func BenchmarkServeHTTPParallel(b *testing.B) {
	h, _ := newTestHandler(&blockingPublisher{}, Config{})
	bodies := loadgen.Bodies(loadgen.BodyOptions{Count: loadgen.DefaultBodies, AppID: "a1", Seed: 1})
	b.SetBytes(int64(len(bodies[0])))
	b.ReportAllocs()
	b.SetParallelism(8)
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		rec := httptest.NewRecorder()
		for pb.Next() {
			body := bodies[int(next.Add(1))%len(bodies)]
			req := httptest.NewRequest(http.MethodPut, "/cms/app/events", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer t")
			rec.Body.Reset()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Errorf("%d %s", rec.Code, rec.Body)
				return
			}
		}
	})
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*loadgen.DefaultBatch), "ns/event")
}
