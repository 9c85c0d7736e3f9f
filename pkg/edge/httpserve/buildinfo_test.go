package httpserve

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/buildinfo"
)

// TestBuildInfoMetric checks that every service's /metrics names its
// build, labelled as dashboards and the status page read it.
func TestBuildInfoMetric(t *testing.T) {
	mux := http.NewServeMux()
	Mount(GetOn(mux), NewRegistry(), NewChecker())
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		"# TYPE cms_build_info gauge",
		`cms_build_info{goversion="` + runtime.Version() + `",revision="` + buildinfo.Revision() + `",version="` + buildinfo.Version() + `"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
}
