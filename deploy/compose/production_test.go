package compose_test

import (
	"encoding/xml"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
)

// clusterConfig is the part of a ClickHouse server configuration that
// defines clusters, their coordination and the server's macros.
type clusterConfig struct {
	RemoteServers struct {
		Clusters []struct {
			XMLName xml.Name
			Shards  []struct {
				InternalReplication bool `xml:"internal_replication"`
				Replicas            []struct {
					Host string `xml:"host"`
					Port string `xml:"port"`
				} `xml:"replica"`
			} `xml:"shard"`
		} `xml:",any"`
	} `xml:"remote_servers"`
	ZooKeeper []struct {
		Host string `xml:"host"`
		Port string `xml:"port"`
	} `xml:"zookeeper>node"`
	Macros struct {
		Shard struct {
			FromEnv string `xml:"from_env,attr"`
		} `xml:"shard"`
		Replica struct {
			FromEnv string `xml:"from_env,attr"`
		} `xml:"replica"`
	} `xml:"macros"`
	TCPPortSecure string `xml:"tcp_port_secure"`
	OpenSSL       struct {
		CertificateFile string `xml:"server>certificateFile"`
		PrivateKeyFile  string `xml:"server>privateKeyFile"`
	} `xml:"openSSL"`
}

// secretTarget returns where a service's secret lands, and whether the
// service has it.
func secretTarget(s types.ServiceConfig, name string) (string, bool) {
	for _, sec := range s.Secrets {
		if sec.Source != name {
			continue
		}
		if sec.Target == "" {
			return "/run/secrets/" + name, true
		}
		if !strings.HasPrefix(sec.Target, "/") {
			return "/run/secrets/" + sec.Target, true
		}
		return sec.Target, true
	}
	return "", false
}

// mountedSecrets maps each in-container path of a service's secrets to the
// secret's name.
func mountedSecrets(s types.ServiceConfig) map[string]string {
	out := map[string]string{}
	for _, sec := range s.Secrets {
		if target, ok := secretTarget(s, sec.Source); ok {
			out[target] = sec.Source
		}
	}
	return out
}

// TestProductionVariant checks compose.production.yaml layered on
// compose.yaml: secrets as files where the services read them, Kafka over
// SASL_SSL, the ClickHouse cluster the consumer names, and the schema
// migration ahead of the consumer.
func TestProductionVariant(t *testing.T) {
	p := loadFiles(t, nil, "compose.yaml", "compose.production.yaml")
	svc := func(t *testing.T, name string) types.ServiceConfig {
		t.Helper()
		s, ok := p.Services[name]
		if !ok {
			t.Fatalf("no service %q (disabled: %v)", name, slices.Collect(maps.Keys(p.DisabledServices)))
		}
		return s
	}
	var cfg clusterConfig
	raw, err := os.ReadFile("clickhouse/cluster.xml")
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("clickhouse/cluster.xml: %v", err)
	}
	clients := []string{"ingest", "consumer", "api", "migrate"}

	t.Run("operator addresses kept and scraped", func(t *testing.T) {
		checkOperatorAddrs(t, p)
		checkScrapeTargets(t, p)
	})

	t.Run("secrets come as files the services mount", func(t *testing.T) {
		for _, name := range clients {
			s := svc(t, name)
			mounted := mountedSecrets(s)
			for v, val := range s.Environment {
				if val == nil {
					continue
				}
				if !strings.HasSuffix(v, "_FILE") {
					if strings.HasSuffix(v, "PASSWORD") {
						t.Errorf("%s: %s is given as a value; give %s_FILE", name, v, v)
					}
					continue
				}
				if _, both := s.Environment[strings.TrimSuffix(v, "_FILE")]; both {
					t.Errorf("%s: both %s and %s are set; the service refuses to start", name, strings.TrimSuffix(v, "_FILE"), v)
				}
				if _, ok := mounted[*val]; !ok {
					t.Errorf("%s: %s=%s, but its secrets land at %v", name, v, *val, slices.Sorted(maps.Keys(mounted)))
				}
			}
			for target, secret := range mounted {
				def, ok := p.Secrets[secret]
				if !ok || def.File == "" {
					t.Errorf("%s: secret %s (at %s) is not defined from a file", name, secret, target)
				}
			}
		}
	})
	t.Run("secret files stay out of git", func(t *testing.T) {
		for name, def := range p.Secrets {
			rel, err := filepath.Rel(mustAbs(t, "secrets"), def.File)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("secret %s comes from %s, outside secrets/ (ignored by git)", name, def.File)
			}
		}
		ignore, err := os.ReadFile("secrets/.gitignore")
		if err != nil || !strings.HasPrefix(string(ignore), "*\n") {
			t.Errorf("secrets/.gitignore must ignore everything but its README: %q %v", ignore, err)
		}
	})
	t.Run("Kafka clients use the SASL_SSL listener", func(t *testing.T) {
		k := svc(t, "kafka")
		protocols := map[string]string{}
		for _, pair := range strings.Split(env(k, "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"), ",") {
			name, proto, _ := strings.Cut(pair, ":")
			protocols[name] = proto
		}
		advertised := map[string]string{} // host:port -> listener
		for _, l := range strings.Split(env(k, "KAFKA_ADVERTISED_LISTENERS"), ",") {
			name, addr, _ := strings.Cut(l, "://")
			advertised[addr] = name
			if strings.Contains(name, "SSL") {
				t.Errorf("advertised listener %s: the image's start script takes a name with SSL for a keystore listener", name)
			}
		}
		for _, name := range []string{"ingest", "consumer"} {
			s := svc(t, name)
			for _, b := range strings.Split(env(s, "KAFKA_BROKERS"), ",") {
				l, ok := advertised[b]
				if !ok || protocols[l] != "SASL_SSL" {
					t.Errorf("%s: broker %s is listener %q (%s); want an advertised SASL_SSL listener", name, b, l, protocols[l])
				}
			}
			if mech := env(s, "KAFKA_SASL_MECHANISM"); !strings.Contains(env(k, "KAFKA_SASL_ENABLED_MECHANISMS"), mech) || mech == "" {
				t.Errorf("%s: SASL mechanism %q; the broker enables %q", name, mech, env(k, "KAFKA_SASL_ENABLED_MECHANISMS"))
			}
		}
		for _, file := range []string{env(k, "KAFKA_SSL_KEYSTORE_LOCATION"), strings.TrimPrefix(env(k, "KAFKA_OPTS"), "-Djava.security.auth.login.config=")} {
			if _, ok := mountedSecrets(k)[file]; !ok {
				t.Errorf("kafka: %s is not one of its secrets", file)
			}
		}
	})
	t.Run("the ClickHouse cluster is the one the clients name", func(t *testing.T) {
		if _, on := p.Services["clickhouse"]; on {
			t.Error("the single ClickHouse server of compose.yaml still starts")
		}
		var names []string
		for _, c := range cfg.RemoteServers.Clusters {
			names = append(names, c.XMLName.Local)
		}
		replicas := map[string]bool{}
		for _, c := range cfg.RemoteServers.Clusters {
			for i, sh := range c.Shards {
				if !sh.InternalReplication {
					t.Errorf("cluster %s shard %d: internal_replication must be true with replicated tables", c.XMLName.Local, i+1)
				}
				for _, r := range sh.Replicas {
					replicas[r.Host] = true
					svc(t, r.Host)
				}
			}
		}
		for _, zk := range cfg.ZooKeeper {
			svc(t, zk.Host)
		}
		if len(cfg.ZooKeeper) == 0 {
			t.Error("no zookeeper (or Keeper) nodes: replicated tables cannot be made")
		}
		// Each server names its own shard and replica.
		seen := map[string]string{}
		for host := range replicas {
			s := svc(t, host)
			shard, replica := env(s, cfg.Macros.Shard.FromEnv), env(s, cfg.Macros.Replica.FromEnv)
			if shard == "" || replica == "" {
				t.Errorf("%s: macros %s=%q %s=%q", host, cfg.Macros.Shard.FromEnv, shard, cfg.Macros.Replica.FromEnv, replica)
			}
			if prev, dup := seen[shard+"/"+replica]; dup {
				t.Errorf("%s and %s are both shard %s replica %s", prev, host, shard, replica)
			}
			seen[shard+"/"+replica] = host
			mounted := mountedSecrets(s)
			for _, f := range []string{cfg.OpenSSL.CertificateFile, cfg.OpenSSL.PrivateKeyFile} {
				if _, ok := mounted[f]; !ok {
					t.Errorf("%s: TLS file %s is not one of its secrets", host, f)
				}
			}
		}
		for _, name := range []string{"consumer", "api", "migrate"} {
			s := svc(t, name)
			if c := env(s, "CLICKHOUSE_CLUSTER"); !slices.Contains(names, c) {
				t.Errorf("%s: CLICKHOUSE_CLUSTER=%q; the servers define %v", name, c, names)
			}
			for _, a := range strings.Split(env(s, "CLICKHOUSE_ADDR"), ",") {
				host, port, err := net.SplitHostPort(a)
				if err != nil || !replicas[host] || port != cfg.TCPPortSecure {
					t.Errorf("%s: ClickHouse address %s; want a cluster server on the secure port %s", name, a, cfg.TCPPortSecure)
				}
			}
		}
	})
	t.Run("the schema is migrated before the consumer starts", func(t *testing.T) {
		m, c := svc(t, "migrate"), svc(t, "consumer")
		if got := command(m); got != "consumer" || len(m.Command) != 2 || m.Command[1] != "migrate" {
			t.Errorf("migrate runs %q; want consumer migrate", m.Command)
		}
		if d, ok := c.DependsOn["migrate"]; !ok || d.Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("consumer depends on migrate %+v; want service_completed_successfully", d)
		}
		if env(c, "CLICKHOUSE_SCHEMA") != "wait" {
			t.Errorf("consumer CLICKHOUSE_SCHEMA=%q; want wait, so it never migrates itself", env(c, "CLICKHOUSE_SCHEMA"))
		}
		for v := range c.Environment {
			if strings.HasPrefix(v, "CLICKHOUSE_") && v != "CLICKHOUSE_SCHEMA" && env(c, v) != env(m, v) {
				t.Errorf("migrate and consumer disagree on %s: %q and %q", v, env(m, v), env(c, v))
			}
		}
		for _, host := range []string{"clickhouse-s1r1", "clickhouse-s1r2", "clickhouse-s2r1", "clickhouse-s2r2"} {
			if d, ok := m.DependsOn[host]; !ok || d.Condition != types.ServiceConditionHealthy {
				t.Errorf("migrate does not wait for %s to be healthy", host)
			}
		}
	})
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
