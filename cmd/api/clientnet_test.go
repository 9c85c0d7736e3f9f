package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
)

// TestForwardedForFromAnUntrustedPeerMovesNoLimit is api serve as
// configured by default, called directly on loopback: no proxy is
// trusted, so sixty wrong tokens each "from" another network in
// X-Forwarded-For meet the bound on one network's failed
// authentications (AUTH_FAILURE_BURST, 30) as they would without it.
func TestForwardedForFromAnUntrustedPeerMovesNoLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	db := filepath.Join(t.TempDir(), "cms.db")
	var out, errs bytes.Buffer
	if code := run(ctx, []string{"-content-db", db, "demo", "--quiet"}, noEnv, &out, &errs); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, errs.String())
	}
	ports, err := childproc.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	env := map[string]string{"CONTENT_DB": db, "API_ADDR": addr, "OPERATOR_ADDR": fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"ENCODER_DIR": "off", "WORDNET_DIR": "off"}
	logs := &childproc.Output{}
	srvCtx, stop := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(srvCtx, []string{"serve"}, lookupIn(env), logs, logs) }()
	t.Cleanup(func() {
		stop()
		if code := <-done; code != 0 {
			t.Errorf("api serve exited %d\n%s", code, tail(logs.String(), 3000))
		}
	})
	waitUntil(t, time.Minute, "api serve ready", func() bool { return status(ctx, "http://"+addr+"/readyz", "") == http.StatusOK })

	var refused, limited int
	for i := range 60 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/cms/app", nil)
		req.Header.Set("Authorization", fmt.Sprintf("Bearer cms_%016x_%s", 0xbad0000+i, strings.Repeat("A", 43)))
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.51.%d.7", i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusUnauthorized:
			refused++
		case http.StatusTooManyRequests:
			limited++
			if resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "too many failed authentications from this network") {
				t.Errorf("429 without Retry-After or its reason: %v %s", resp.Header, body)
			}
		default:
			t.Fatalf("wrong token %d: %d %s", i, resp.StatusCode, body)
		}
	}
	t.Logf("60 wrong tokens, each with another X-Forwarded-For: %d refused 401, %d limited 429", refused, limited)
	if limited < 25 || refused > 35 {
		t.Errorf("%d limited, %d refused: the bound on one network's failures was moved by X-Forwarded-For", limited, refused)
	}
	// The demo's token, never used before, is not refused for them.
	if code := status(ctx, "http://"+addr+"/cms/app", strings.TrimSpace(out.String())); code != http.StatusOK {
		t.Errorf("the demo token from the network past its bound: %d", code)
	}
}
