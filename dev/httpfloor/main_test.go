package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+" "+string(body))
	}))
	defer upstream.Close()

	cases := []struct {
		name, proxy string
		want        string
	}{
		{"answers", "", `{"accepted":5,"rejected":0}`},
		{"proxies", upstream.URL, `PUT /cms/app/events {"events":[]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := handler(tc.proxy)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodPut, srv.URL+"/cms/app/events", strings.NewReader(`{"events":[]}`))
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || string(body) != tc.want {
				t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, body, tc.want)
			}
			// A length, not chunks, as ingest answers.
			if got := resp.Header.Get("Content-Length"); got != strconv.Itoa(len(tc.want)) {
				t.Errorf("Content-Length %q, want %d", got, len(tc.want))
			}
		})
	}
}

func TestHandlerRefusesARelativeProxy(t *testing.T) {
	if _, err := handler("127.0.0.1:8081"); err == nil || !strings.Contains(err.Error(), "not an absolute URL") {
		t.Fatalf("handler(relative) error = %v", err)
	}
}
