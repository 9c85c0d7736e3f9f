package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestHTTPLimitFlagsRefuseNoLimit checks that neither command starts with
// a limit that net/http would read as none at all, whether it comes from
// the environment or a flag.
func TestHTTPLimitFlagsRefuseNoLimit(t *testing.T) {
	db := filepath.Join(t.TempDir(), "cms.db")
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"serve", "-read-timeout", "0s"}, nil, "serve: -read-timeout 0s: must be positive"},
		{[]string{"serve"}, map[string]string{"HTTP_READ_HEADER_TIMEOUT": "-1s"}, "serve: -read-header-timeout -1s: must be positive"},
		{[]string{"serve"}, map[string]string{"HTTP_MAX_HEADER_BYTES": "10"}, "serve: -max-header-bytes 10: must be at least 1024"},
		{[]string{"gateway", "-idle-timeout", "0s"}, nil, "gateway: -idle-timeout 0s: must be positive"},
		{[]string{"gateway"}, map[string]string{"HTTP_WRITE_TIMEOUT": "0s"}, "gateway: -write-timeout 0s: must be positive"},
		{[]string{"gateway"}, map[string]string{"HTTP_WRITE_TIMEOUT": "10s"}, "write timeout 10s must be longer than the response timeout 30s"},
	} {
		env := map[string]string{"CONTENT_DB": db, "API_ADDR": "127.0.0.1:0", "GATEWAY_ADDR": "127.0.0.1:0"}
		for k, v := range tc.env {
			env[k] = v
		}
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		var out bytes.Buffer
		if code := run(t.Context(), tc.args, lookup, &out, &out); code == 0 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v %v: exit %d, output %q; want a failure saying %q", tc.args, tc.env, code, out.String(), tc.want)
		}
	}
}
