package ingest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/pipeline/ingest"
)

// TestHTTPLimits checks the server limits ingest serves with: defaults
// for what is unset, and a write timeout long enough to read a request,
// wait for the broker and answer, unless one is given.
func TestHTTPLimits(t *testing.T) {
	cases := []struct {
		name string
		cfg  ingest.ServiceConfig
		want httpserve.Limits
	}{
		{"defaults", ingest.ServiceConfig{}, httpserve.Limits{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
			WriteTimeout: 30*time.Second + ingest.DefaultProduceTimeout + 5*time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}},
		{"write timeout follows the read and produce timeouts", ingest.ServiceConfig{
			HTTP: httpserve.Limits{ReadTimeout: 10 * time.Second}, Handler: ingest.Config{ProduceTimeout: 8 * time.Second}},
			httpserve.Limits{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 23 * time.Second,
				IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}},
		{"all given", ingest.ServiceConfig{HTTP: httpserve.Limits{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second,
			WriteTimeout: time.Minute, IdleTimeout: 4 * time.Second, MaxHeaderBytes: 4096}},
			httpserve.Limits{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: time.Minute,
				IdleTimeout: 4 * time.Second, MaxHeaderBytes: 4096}},
	}
	for _, tc := range cases {
		if got := tc.cfg.HTTPLimits(); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestCheckRefusesAWriteTimeoutWithinTheProduceTimeout(t *testing.T) {
	for _, tc := range []struct {
		write, produce time.Duration
		wantErr        string
	}{
		{write: 0},
		{write: 6 * time.Second},
		{write: 5 * time.Second, wantErr: "write timeout 5s must be longer than the produce timeout 5s"},
		{write: 10 * time.Second, produce: 20 * time.Second, wantErr: "write timeout 10s must be longer than the produce timeout 20s"},
	} {
		cfg := ingest.ServiceConfig{HTTP: httpserve.Limits{WriteTimeout: tc.write}, Handler: ingest.Config{ProduceTimeout: tc.produce}}
		err := cfg.Check()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("write %s, produce %s: %v; want %q", tc.write, tc.produce, err, tc.wantErr)
		}
	}
}
