package chstore

import (
	"flag"
	"reflect"
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/envflag"
)

func TestDefineFlags(t *testing.T) {
	cases := []struct {
		name     string
		role     Role
		env      map[string]string
		want     Config
		addrHelp string
	}{
		{"tables", Tables, nil, Config{Addrs: []string{"127.0.0.1:9000"}, Database: "default", Username: "default"}, "comma-separated"},
		{"history needs an address", History, nil, Config{Database: "default", Username: "default"}, "for HISTORICAL suggestions"},
		{"environment", History, map[string]string{"CLICKHOUSE_ADDR": "a:9000,b:9000", "CLICKHOUSE_DATABASE": "analytics",
			"CLICKHOUSE_USER": "u", "CLICKHOUSE_PASSWORD": "p"},
			Config{Addrs: []string{"a:9000", "b:9000"}, Database: "analytics", Username: "u", Password: "p"}, "for HISTORICAL suggestions"},
		{"TLS by environment", Tables, map[string]string{"CLICKHOUSE_TLS": "true", "CLICKHOUSE_TLS_CA_FILE": "/etc/ch/ca.pem",
			"CLICKHOUSE_TLS_SERVER_NAME": "ch.internal", "CLICKHOUSE_TLS_CERT_FILE": "/etc/ch/client.pem", "CLICKHOUSE_TLS_KEY_FILE": "/etc/ch/client-key.pem"},
			Config{Addrs: []string{"127.0.0.1:9000"}, Database: "default", Username: "default", TLS: TLS{Enabled: true, CAFile: "/etc/ch/ca.pem",
				ServerName: "ch.internal", CertFile: "/etc/ch/client.pem", KeyFile: "/etc/ch/client-key.pem"}}, "comma-separated"},
		{"cluster", Tables, map[string]string{"CLICKHOUSE_CLUSTER": "cms"},
			Config{Addrs: []string{"127.0.0.1:9000"}, Database: "default", Username: "default", Cluster: "cms"}, "comma-separated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := envflag.New(flag.NewFlagSet("t", flag.ContinueOnError), func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			config := DefineFlags(fs, tc.role)
			if err := fs.Parse(nil); err != nil {
				t.Fatal(err)
			}
			if got := config(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if help := fs.Lookup("clickhouse-addr").Usage; !strings.Contains(help, tc.addrHelp) {
				t.Errorf("address help %q does not say %q", help, tc.addrHelp)
			}
			if def := fs.Lookup("clickhouse-password").DefValue; def != "" {
				t.Errorf("help shows the password %q", def)
			}
		})
	}
}
