package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "want GET", http.StatusMethodNotAllowed)
		}
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("{\"status\": \"unready\",\n \"failed\": {\"kafka\": \"connection refused\"}}\n" + strings.Repeat("x", 500)))
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// A port that was just free: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/readyz"
	ln.Close()

	tests := []struct {
		name   string
		args   []string
		code   int
		stderr []string // substrings
	}{
		{"200", []string{srv.URL + "/ok"}, 0, nil},
		{"204", []string{srv.URL + "/empty"}, 0, nil},
		{"503 quotes the body on one line", []string{srv.URL + "/down"}, 1, []string{"503 Service Unavailable", `"failed": {"kafka": "connection refused"}}`}},
		{"404", []string{srv.URL + "/nowhere"}, 1, []string{"404 Not Found"}},
		{"redirect is not followed", []string{srv.URL + "/moved"}, 1, []string{"302 Found"}},
		{"unreachable", []string{closed}, 1, []string{"GET " + closed, "connection refused"}},
		{"timeout", []string{"-timeout", "100ms", srv.URL + "/slow"}, 1, []string{"deadline exceeded"}},
		{"not a URL", []string{"127.0.0.1:8080/readyz"}, 1, []string{"parse URL"}},
		{"no host", []string{"http:///readyz"}, 1, []string{"want http:// or https:// and a host"}},
		{"other scheme", []string{"ftp://127.0.0.1/readyz"}, 1, []string{"want http:// or https://"}},
		{"no URL", nil, 1, []string{"want one URL, got 0"}},
		{"two URLs", []string{srv.URL + "/ok", srv.URL + "/ok"}, 1, []string{"want one URL, got 2"}},
		{"zero timeout", []string{"-timeout", "0s", srv.URL + "/ok"}, 1, []string{"must be positive"}},
		{"bad flag", []string{"-nope", srv.URL + "/ok"}, 1, []string{"flag provided but not defined: -nope"}},
		{"help", []string{"-h"}, 0, []string{"Usage: api probe"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"probe"}, tt.args...)
			code := run(t.Context(), args, noEnv, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d", code, tt.code)
			}
			for _, want := range tt.stderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q", want)
				}
			}
			// The flag package prints the usage after a bad flag; every other
			// failure is one short line, quoted as is in a health log.
			if tt.code == 1 && tt.name != "bad flag" {
				if reason := strings.TrimSuffix(stderr.String(), "\n"); strings.Contains(reason, "\n") || len(reason) > 2*maxReasonBytes {
					t.Errorf("reason is not one short line")
				}
			}
			if tt.code == 0 && tt.name != "help" && stderr.Len() > 0 {
				t.Errorf("a passing probe printed something")
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
			if t.Failed() {
				t.Logf("stderr:\n%s", stderr.String())
			}
		})
	}
}

func TestUsageListsProbe(t *testing.T) {
	var stdout bytes.Buffer
	if code := run(t.Context(), []string{"help"}, noEnv, &stdout, &bytes.Buffer{}); code != 0 {
		t.Fatalf("help exit code = %d", code)
	}
	if !strings.Contains(stdout.String(), "probe [-timeout DURATION] URL") {
		t.Errorf("help does not list probe:\n%s", stdout.String())
	}
}
