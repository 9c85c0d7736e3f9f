package localstack

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// from is an HTTP client whose connections come from the loopback
// address source.
func from(t *testing.T, source string) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}}).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// TestOnlyTheGatewayIsTrusted runs the whole local stack: ingest and the
// api trust the gateway's own address alone. A client calling them
// directly on loopback names whatever networks it likes in
// X-Forwarded-For and is still one network, whose wrong tokens are
// limited; through the gateway, clients of two networks are counted
// apart; and the stack says, beside its tokens, what one source per
// suggestion lets the runtime token do.
func TestOnlyTheGatewayIsTrusted(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	st, err := Start(ctx, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Stop()
	if !strings.Contains(st.Warning, "HISTORY_MIN_SOURCES=1") || !strings.Contains(st.Warning, "runtime token") {
		t.Errorf("the warning beside the tokens %q does not say what HISTORY_MIN_SOURCES=1 lets the runtime token do", st.Warning)
	}
	wrong := func(i int) string { return fmt.Sprintf("Bearer cms_%016x_%s", 0x10ca1000+i, strings.Repeat("A", 43)) }
	send := func(c *http.Client, method, url, auth, xff string) int {
		req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(`{"events":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", auth)
		req.Header.Set("Content-Type", "application/json")
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	for _, svc := range []struct{ name, method, url string }{
		{"ingest", http.MethodPut, "http://" + st.Ingest + "/cms/app/events"},
		{"api", http.MethodGet, "http://" + st.API + "/cms/app"},
	} {
		// Another loopback network per service, so that each starts with
		// its whole burst.
		c := from(t, map[string]string{"ingest": "127.0.10.1", "api": "127.0.11.1"}[svc.name])
		limited := 0
		for i := range 60 {
			if send(c, svc.method, svc.url, wrong(i), fmt.Sprintf("198.51.%d.7", i)) == http.StatusTooManyRequests {
				limited++
			}
		}
		if limited < 25 {
			t.Errorf("%s called directly: %d of 60 wrong tokens, each with another X-Forwarded-For, limited; want all past the burst of 30", svc.name, limited)
		}
	}

	// Through the gateway: one client network spends its burst, another
	// is untouched, so the gateway's X-Forwarded-For is trusted.
	gw := "http://" + st.Gateway + "/cms/app/events"
	first, second := from(t, "127.0.20.1"), from(t, "127.0.21.1")
	limited := false
	for i := range 40 {
		if send(first, http.MethodPut, gw, wrong(100+i), "") == http.StatusTooManyRequests {
			limited = true
		}
	}
	if !limited {
		t.Fatal("40 wrong tokens through the gateway from one network were never limited")
	}
	if code := send(second, http.MethodPut, gw, wrong(200), ""); code != http.StatusUnauthorized {
		t.Errorf("a wrong token through the gateway from another network: %d, want 401 (its own budget)", code)
	}
	if code := send(second, http.MethodGet, "http://"+st.Gateway+"/cms/app", "Bearer "+st.Token, ""); code != http.StatusOK {
		t.Errorf("the runtime token through the gateway: %d", code)
	}
}
