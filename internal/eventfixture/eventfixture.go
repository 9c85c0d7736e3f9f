// Package eventfixture gives the tests of the packages that read event
// batches the same bodies: the event schema's fixtures as batches, and a
// batch of the shape runtimes send most.
package eventfixture

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Batches returns every fixture under dir (schemas/events/testdata) as a
// batch body: event fixtures wrapped in a batch, batch fixtures as they
// are. It fails tb when there are none.
func Batches(tb testing.TB, dir string) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, set := range []struct {
		pattern string
		wrap    bool
	}{{"valid/*.json", true}, {"invalid/*.json", true}, {"batches/valid/*.json", false}, {"batches/invalid/*.json", false}} {
		files, err := filepath.Glob(filepath.Join(dir, set.pattern))
		if err != nil {
			tb.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				tb.Fatal(err)
			}
			if set.wrap {
				data = []byte(`{"events":[` + string(bytes.TrimSpace(data)) + `]}`)
			}
			out = append(out, data)
		}
	}
	if len(out) == 0 {
		tb.Fatalf("no fixtures under %s", dir)
	}
	return out
}

// RequestResponses is a batch of n REQUEST_RESPONSE events of about 1 KB
// each, of app "app-1".
func RequestResponses(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"events":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","appId":"app-1","sessionId":"session-%d","userId":"user-%d","channel":"web-chat","platform":"stentor-web","selectedHandler":"OrderStatusHandler","currentHandler":"OrderStatusHandler","environment":"production","isoTime":"2026-11-21T10:00:00.000Z","payload":{"request":{"type":"INTENT_REQUEST","intentId":"OrderStatus","rawQuery":"where is my order number %d, it should have arrived yesterday","sessionId":"session-%d","userId":"user-%d","matchConfidence":0.87},"response":{"outputSpeech":{"displayText":"Your order %d shipped yesterday and should arrive tomorrow before noon.","ssml":"<speak>Your order %d shipped yesterday and should arrive tomorrow before noon.</speak>"},"displays":[{"type":"LIST","title":"Orders","items":[{"title":"Order %d","token":"order-%d","description":"Shipped, arriving tomorrow"},{"title":"Order %d","token":"order-%d","description":"Delivered last week"}]}]},"tag":"order-status"}}`,
			i%7, i, i, i%7, i, i, i, i, i, i+1, i+1)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}
