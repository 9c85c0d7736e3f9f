package main

import (
	"strings"
	"testing"

	"github.com/assistantcms/cms/internal/testcert"
)

func TestSecurityFlags(t *testing.T) {
	certs := testcert.New(t)
	cases := []struct {
		name    string
		sec     security
		users   []string
		wantErr string
		optsLen int
	}{
		{name: "plaintext", optsLen: 0},
		{name: "TLS", sec: security{certFile: certs.ServerCert, keyFile: certs.ServerKey}, optsLen: 1},
		{name: "TLS with client certificates", sec: security{certFile: certs.ServerCert, keyFile: certs.ServerKey, clientCAFile: certs.CA}, optsLen: 1},
		{name: "SASL users", users: []string{"plain:a:p:with:colons", "SCRAM-SHA-512:b:q"}, optsLen: 3},
		{name: "certificate without key", sec: security{certFile: certs.ServerCert}, wantErr: "-tls-cert-file and -tls-key-file go together"},
		{name: "client authorities without TLS", sec: security{clientCAFile: certs.CA}, wantErr: "-tls-client-ca-file needs -tls-cert-file"},
		{name: "unknown mechanism", users: []string{"GSSAPI:a:p"}, wantErr: `mechanism "GSSAPI"`},
		{name: "no password", users: []string{"PLAIN:a"}, wantErr: "want MECHANISM:USER:PASSWORD"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sec := tc.sec
			var err error
			for _, u := range tc.users {
				if err = sec.addUser(u); err != nil {
					break
				}
			}
			if err == nil {
				var opts int
				o, tr, e := sec.options()
				opts, err = len(o), e
				if err == nil && (opts != tc.optsLen || tr == nil) {
					t.Errorf("%d options, transport %v; want %d", opts, tr, tc.optsLen)
				}
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}
