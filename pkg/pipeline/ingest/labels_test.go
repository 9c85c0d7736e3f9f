package ingest

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/assistantcms/cms/pkg/pipeline/event"
)

// countSeries counts the series of every metric family reg gathers.
func countSeries(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		n += len(mf.GetMetric())
	}
	return n
}

// TestInventedValuesAddNoSeries sends what a client can invent (methods,
// paths, event types and names, unknown and repeated keys, fields of the
// wrong type at every depth, field paths with indexes) in two rounds of
// different values: the second adds no metric series, so no label takes
// its value from the request.
func TestInventedValuesAddNoSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := New(Config{}, event.NewValidator(event.Limits{}), allowAll{}, &blockingPublisher{}, nil, NewMetrics(reg), slog.New(slog.NewTextHandler(io.Discard, nil)))
	send := func(method, path, body string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPut, path, strings.NewReader(body))
		req.Method = method
		h.ServeHTTP(rec, req)
	}
	round := func(tag string) int {
		for i := range 10 {
			x := fmt.Sprintf("%s%d%s", tag, i, strings.Repeat("z", 500))
			send("INVENT"+x, "/cms/app/events", `{"events":[{"type":"REQUEST","name":"n"}]}`)
			send(http.MethodPut, "/cms/"+x, `{"events":[{"type":"REQUEST","name":"n"}]}`)
			events := []string{
				`{"type":"` + x + `","name":"` + x + `","` + x + `":1}`,
				`{"type":"REQUEST","name":"n","type":"` + x + `"}`,
				`{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","payload":{"request":{"` + x + `":1},"response":{"displays":[{"` + x + `":1,"title":7}]}}}`,
				`{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","payload":{"request":{},"response":{"displays":[{},{"items":[{},{"title":{"` + x + `":1}}]}]}}}`,
				`{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","payload":{"request":{},"response":{},"tag":[1,"` + x + `",{}]}}`,
				`{"type":7,"name":["` + x + `"],"sessionId":{"` + x + `":1},"channel":` + fmt.Sprint(i) + `}`,
				`"` + x + `"`,
			}
			send(http.MethodPut, "/cms/app/events", `{"events":[`+strings.Join(events, ",")+`]}`)
			send(http.MethodPut, "/cms/apps/events", `{"events":[`+x+`]}`)
		}
		return countSeries(t, reg)
	}
	first := round("a")
	if second := round("b"); second != first {
		t.Errorf("a second round of invented values grew the series from %d to %d", first, second)
	}
}
