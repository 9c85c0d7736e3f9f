package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestCORSOriginsCheckedAtStartUp: a mistaken origin stops api serve and
// api gateway at start-up with a message naming it, whether it comes from
// the environment or a flag.
func TestCORSOriginsCheckedAtStartUp(t *testing.T) {
	db := filepath.Join(t.TempDir(), "cms.db")
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"serve"}, "https://app.example.com/chat", `serve: -cors-allowed-origins (CORS_ALLOWED_ORIGINS): allowed origin "https://app.example.com/chat": a path ("/chat") is not part of an origin`},
		{[]string{"serve", "-cors-allowed-origins", "https://*.example.com"}, "", `allowed origin "https://*.example.com": wildcards are not supported`},
		{[]string{"gateway"}, "http://127.0.0.1:3000, ftp://files.example.com", `gateway: -cors-allowed-origins (CORS_ALLOWED_ORIGINS): allowed origin "ftp://files.example.com": the scheme must be http or https`},
		{[]string{"gateway", "-cors-allowed-origins", "app.example.com:443"}, "", `allowed origin "app.example.com:443": no // after the scheme`},
	} {
		env := map[string]string{"CONTENT_DB": db, "API_ADDR": "127.0.0.1:0", "GATEWAY_ADDR": "127.0.0.1:0", "CORS_ALLOWED_ORIGINS": tc.env}
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		var out bytes.Buffer
		if code := run(t.Context(), tc.args, lookup, &out, &out); code == 0 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v %q: exit %d, output %q; want a failure saying %q", tc.args, tc.env, code, out.String(), tc.want)
		}
	}
}
