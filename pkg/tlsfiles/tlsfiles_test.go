package tlsfiles

import (
	"strings"
	"testing"
)

func TestConfig(t *testing.T) {
	names := Names{Server: "S", CA: "S_CA", Cert: "S_CERT", Key: "S_KEY"}
	for _, tc := range []struct {
		name    string
		f       Files
		on      bool
		wantErr string
	}{
		{name: "zero value is plain", f: Files{}},
		{name: "enabled alone trusts the system", f: Files{Enabled: true}, on: true},
		{name: "a server name implies TLS", f: Files{ServerName: "db.internal"}, on: true},
		{name: "missing CA file", f: Files{CAFile: "/nonexistent/ca.pem"}, on: true, wantErr: "read the S TLS CA file (S_CA): open /nonexistent/ca.pem"},
		{name: "certificate without key", f: Files{CertFile: "c.pem"}, on: true, wantErr: `the S TLS client certificate "c.pem" (S_CERT) needs its key (S_KEY)`},
		{name: "key without certificate", f: Files{KeyFile: "k.pem"}, on: true, wantErr: `the S TLS client key "k.pem" (S_KEY) needs its certificate (S_CERT)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.On(); got != tc.on {
				t.Errorf("On() = %v, want %v", got, tc.on)
			}
			cfg, err := tc.f.Config(names)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want one containing %q", err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("error %v", err)
			case (cfg != nil) != tc.on:
				t.Errorf("config %v for TLS on=%v", cfg, tc.on)
			case cfg != nil && cfg.ServerName != tc.f.ServerName:
				t.Errorf("server name %q, want %q", cfg.ServerName, tc.f.ServerName)
			}
		})
	}
}
