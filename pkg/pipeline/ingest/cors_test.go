package ingest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/edge/cors"
)

// TestCORS checks what a page on another origin gets from ingest: the
// preflight of its PUT answered, and every answer, errors included,
// readable by its script.
func TestCORS(t *testing.T) {
	const page, other = "https://app.example.com", "https://other.example"
	policy, err := cors.New([]string{page})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, startBroker(t, ""), harnessOpts{cors: policy})
	token := "Bearer " + h.tokens["a1"]
	preflight := []string{"Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "authorization,content-type,idempotency-key"}
	for _, tc := range []struct {
		name        string
		method      string
		path        string
		body        string
		headers     []string
		status      int
		allowOrigin string
		inBody      string
	}{
		{"preflight", http.MethodOptions, "/cms/app/events", "", append([]string{"Origin", page}, preflight...), 204, page, ""},
		{"preflight of the other spelling", http.MethodOptions, "/cms/apps/events", "", append([]string{"Origin", page}, preflight...), 204, page, ""},
		{"preflight from an origin not allowed", http.MethodOptions, "/cms/app/events", "", append([]string{"Origin", other}, preflight...), 403, "", `"httpStatus":403`},
		{"batch", http.MethodPut, "/cms/app/events", eventsBody(launch("s")),
			[]string{"Origin", page, "Authorization", token, "Content-Type", "application/json"}, 200, page, `"accepted":1`},
		{"refused token, still readable", http.MethodPut, "/cms/app/events", eventsBody(launch("s")),
			[]string{"Origin", page, "Authorization", "Bearer nope", "Content-Type", "application/json"}, 401, page, `"message":"Unauthorized"`},
		{"batch from an origin not allowed", http.MethodPut, "/cms/app/events", eventsBody(launch("s")),
			[]string{"Origin", other, "Authorization", token, "Content-Type", "application/json"}, 200, "", `"accepted":1`},
		{"not a browser", http.MethodPut, "/cms/app/events", eventsBody(launch("s")),
			[]string{"Authorization", token, "Content-Type", "application/json"}, 200, "", `"accepted":1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, h.url+tc.path, strings.NewReader(tc.body))
			must(t, err)
			for i := 0; i+1 < len(tc.headers); i += 2 {
				req.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			must(t, err)
			hd := resp.Header
			if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.inBody) {
				t.Fatalf("%d %s, want %d with %s", resp.StatusCode, body, tc.status, tc.inBody)
			}
			if got := hd.Values("Access-Control-Allow-Origin"); len(got) != 0 && (len(got) != 1 || got[0] != tc.allowOrigin) || len(got) == 0 && tc.allowOrigin != "" {
				t.Errorf("Access-Control-Allow-Origin %q, want %q", got, tc.allowOrigin)
			}
			if hd.Get("Vary") != "Origin" {
				t.Errorf("Vary %q, want Origin first", hd.Values("Vary"))
			}
			switch {
			case tc.status == 204:
				for _, want := range []string{"PUT"} {
					if !strings.Contains(hd.Get("Access-Control-Allow-Methods"), want) {
						t.Errorf("Access-Control-Allow-Methods %q lacks %s", hd.Get("Access-Control-Allow-Methods"), want)
					}
				}
				for _, want := range []string{"Authorization", "Authorize", "Content-Type", "Content-Encoding", "Idempotency-Key"} {
					if !strings.Contains(hd.Get("Access-Control-Allow-Headers"), want) {
						t.Errorf("Access-Control-Allow-Headers %q lacks %s", hd.Get("Access-Control-Allow-Headers"), want)
					}
				}
			case tc.body != "" && tc.allowOrigin != "":
				// What the script reads: a JSON body, and the headers
				// it may need exposed.
				if !json.Valid(bytes.TrimSpace(body)) || hd.Get("Content-Type") != "application/json" {
					t.Errorf("Content-Type %q, body %s: want JSON", hd.Get("Content-Type"), body)
				}
				for _, want := range []string{"X-Request-Id", "Retry-After"} {
					if !strings.Contains(hd.Get("Access-Control-Expose-Headers"), want) {
						t.Errorf("Access-Control-Expose-Headers %q lacks %s", hd.Get("Access-Control-Expose-Headers"), want)
					}
				}
			}
		})
	}
}
