package ingest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
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
