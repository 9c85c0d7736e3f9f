package graphql

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/headless"
)

// TestGraphiQLInABrowser: in headless Chromium the explorer renders under
// its Content-Security-Policy (its inline code allowed by hash, so the
// editor shows the default query), while code injected inline is refused,
// and no other site may frame it.
func TestGraphiQLInABrowser(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.srv.URL+"/cms/graphql", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'none'") ||
		strings.Contains(csp, "unsafe-inline") || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("GraphiQL's page: CSP %q, X-Frame-Options %q", csp, resp.Header.Get("X-Frame-Options"))
	}

	p := headless.Open(t.Context(), t, e.srv.URL+"/cms/graphql", 1200, 800)
	p.WaitFor(`document.querySelector(".graphiql-container") !== null && document.body.textContent.includes("updatedAt")`, 20*time.Second)
	var injected any
	p.MustEval(`(() => { const s = document.createElement("script"); s.textContent = "window.injected = 1"; document.head.appendChild(s); return window.injected ?? null })()`, &injected)
	if injected != nil {
		t.Errorf("an inline script injected into the page ran (%v): the policy does not hold", injected)
	}
}
