package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkEventBatch sends one-event batches through a gateway on
// loopback to an upstream answering as ingest does (202 with a small JSON
// body), from parallel clients: the gateway's cost per request, beside the
// client's and upstream's in the same process.
func BenchmarkEventBatch(b *testing.B) {
	answer := []byte(`{"accepted":1}`)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write(answer)
	}))
	defer up.Close()
	gw := front(b, Config{Ingest: up.URL, API: up.URL})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	body := bytes.Repeat([]byte("x"), 1024)
	b.ReportAllocs()
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPut, gw+"/cms/app/events", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer tok")
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}
