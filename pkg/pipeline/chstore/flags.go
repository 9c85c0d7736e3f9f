package chstore

import (
	"github.com/assistantcms/cms/pkg/envflag"
)

// Role is what a command connects to ClickHouse for; the flags' defaults
// and help follow from it.
type Role int

// The roles.
const (
	// Tables: a command that writes or reads the pipeline's tables (the
	// consumer, ingest resubmit); it needs a server.
	Tables Role = iota
	// History: the api reading past queries for HISTORICAL suggestions
	// and the rollups for the analytics page; no address means neither.
	History
)

// DefineFlags defines the connection flags on fs, each with its
// environment variable. The function it returns reads them once fs has
// been parsed.
func DefineFlags(fs *envflag.Set, role Role) func() Config {
	addrDefault, addrHelp, dbHelp := "127.0.0.1:9000", "comma-separated ClickHouse native-protocol addresses", "ClickHouse database of the tables"
	if role == History {
		addrDefault, addrHelp, dbHelp = "", "ClickHouse native-protocol addresses for HISTORICAL suggestions and /analytics (empty: neither)", "ClickHouse database holding query_sources and the rollups"
	}
	addrs := fs.String("clickhouse-addr", "CLICKHOUSE_ADDR", addrDefault, addrHelp)
	db := fs.String("clickhouse-database", "CLICKHOUSE_DATABASE", "default", dbHelp)
	user := fs.String("clickhouse-user", "CLICKHOUSE_USER", "default", "ClickHouse user")
	password := fs.Secret("clickhouse-password", "CLICKHOUSE_PASSWORD", "", "ClickHouse password")
	tlsOn := fs.Bool("clickhouse-tls", "CLICKHOUSE_TLS", false, "connect over TLS, to the secure native port (tcp_port_secure); implied by the other -clickhouse-tls-* flags")
	ca := fs.String("clickhouse-tls-ca-file", "CLICKHOUSE_TLS_CA_FILE", "", "PEM file of the CA certificates that sign ClickHouse's certificate (empty: the system's roots)")
	serverName := fs.String("clickhouse-tls-server-name", "CLICKHOUSE_TLS_SERVER_NAME", "", "name ClickHouse's certificate must carry (empty: the host of the address)")
	cert := fs.String("clickhouse-tls-cert-file", "CLICKHOUSE_TLS_CERT_FILE", "", "PEM client certificate for ClickHouse servers that ask for one (needs -clickhouse-tls-key-file)")
	key := fs.String("clickhouse-tls-key-file", "CLICKHOUSE_TLS_KEY_FILE", "", "PEM file of the client certificate's private key")
	cluster := fs.String("clickhouse-cluster", "CLICKHOUSE_CLUSTER", "",
		"ClickHouse cluster (from the servers' remote_servers) the tables are sharded and replicated over; empty: one server")
	return func() Config {
		return Config{Addrs: envflag.List(*addrs), Database: *db, Username: *user, Password: *password, Cluster: *cluster,
			TLS: TLS{Enabled: *tlsOn, CAFile: *ca, ServerName: *serverName, CertFile: *cert, KeyFile: *key}}
	}
}
