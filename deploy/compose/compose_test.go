// Package compose_test checks deploy/compose without a Docker engine: the
// compose file through the Compose Specification's own loader (schema,
// interpolation, references, as "docker compose config" reads it), the
// Dockerfile, and the build script both CI and the image run.
package compose_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"

	"github.com/assistantcms/cms/internal/debpkg"
	"github.com/assistantcms/cms/pkg/envflag"
)

const repoRoot = "../.."

// Services built from this repository, and how each is started.
var ourServices = map[string]string{
	"seed-content": "api import",
	"seed":         "api demo",
	"ingest":       "ingest",
	"consumer":     "consumer",
	"api":          "api serve",
	"gateway":      "api gateway",
}

// listenEnv names the variable holding the HTTP listen address of each
// server command.
var listenEnv = map[string]string{
	"ingest":      "INGEST_ADDR",
	"consumer":    "CONSUMER_ADDR",
	"api serve":   "API_ADDR",
	"api gateway": "GATEWAY_ADDR",
}

func loadProject(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	return loadFiles(t, env, "compose.yaml")
}

// loadFiles loads compose files layered in order, as -f flags do.
func loadFiles(t *testing.T, env map[string]string, files ...string) *types.Project {
	t.Helper()
	var list []string
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	// No process environment and no .env file: the test sees the defaults
	// written in compose.yaml, whatever the machine has set.
	opts, err := cli.NewProjectOptions(files,
		cli.WithWorkingDirectory("."),
		cli.WithEnv(list),
		cli.WithInterpolation(true),
		cli.WithNormalization(true),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(t.Context())
	if err != nil {
		t.Fatalf("load %s: %v", strings.Join(files, " + "), err)
	}
	return p
}

// command names what a service runs: the binary and, for api, its
// subcommand ("api serve", "ingest").
func command(s types.ServiceConfig) string {
	if len(s.Command) == 0 {
		return ""
	}
	words := []string{filepath.Base(s.Command[0])}
	if words[0] == "api" && len(s.Command) > 1 {
		words = append(words, s.Command[1])
	}
	return strings.Join(words, " ")
}

func env(s types.ServiceConfig, name string) string {
	if v := s.Environment[name]; v != nil {
		return *v
	}
	return ""
}

// operatorAddrEnv is the variable of every server's operator address.
const operatorAddrEnv = "OPERATOR_ADDR"

// checkScrapeTargets checks that prometheus.yml scrapes each server once,
// on its operator address: the only one that serves /metrics.
func checkScrapeTargets(t *testing.T, p *types.Project) {
	t.Helper()
	var cfg struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, filepath.Join(repoRoot, "deploy/prometheus/prometheus.yml"), &cfg)
	n := 0
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				n++
				host, pt, _ := net.SplitHostPort(target)
				s, ok := p.Services[host]
				if !ok {
					t.Errorf("Prometheus scrapes %s: no service %s", target, host)
					continue
				}
				if got := env(s, operatorAddrEnv); got == "" || port(t, got) != pt {
					t.Errorf("Prometheus scrapes %s, %s serves its operator endpoints on %q", target, host, got)
				}
			}
		}
	}
	if n != len(listenEnv) {
		t.Errorf("Prometheus scrapes %d targets, want the %d servers", n, len(listenEnv))
	}
}

// checkOperatorAddrs checks that every server has an operator address
// apart from its listen address, that the status page reads each
// service's metrics there, and that no host reaches an operator address
// but the api's, published on loopback for its status page.
func checkOperatorAddrs(t *testing.T, p *types.Project) {
	t.Helper()
	operatorPort := map[string]string{}
	for name, s := range p.Services {
		lv, ok := listenEnv[command(s)]
		if !ok || env(s, lv) == "" {
			// One-shots such as "consumer migrate" serve nothing.
			continue
		}
		op := env(s, operatorAddrEnv)
		if op == "" {
			t.Errorf("%s: no %s; /metrics and /status would answer on its listen address", name, operatorAddrEnv)
			continue
		}
		if port(t, op) == port(t, env(s, lv)) {
			t.Errorf("%s: %s=%s is its listen address", name, operatorAddrEnv, op)
		}
		operatorPort[name] = port(t, op)
	}
	sources := envflag.List(env(p.Services["api"], "STATUS_SOURCES"))
	if len(sources) != 3 {
		t.Errorf("STATUS_SOURCES=%v, want ingest, consumer and gateway", sources)
	}
	for _, src := range sources {
		name, raw, _ := strings.Cut(src, "=")
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() != name || u.Port() != operatorPort[name] || u.Path != "/metrics" {
			t.Errorf("STATUS_SOURCES reads %s at %s, want http://%s:%s/metrics", name, raw, name, operatorPort[name])
		}
	}
	for name, s := range p.Services {
		for _, pc := range s.Ports {
			if fmt.Sprint(pc.Target) != operatorPort[name] {
				continue
			}
			if name != "api" || pc.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes its operator port %d on %q; only the api's, on 127.0.0.1", name, pc.Target, pc.HostIP)
			}
		}
	}
}

func port(t *testing.T, hostport string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatalf("address %q: %v", hostport, err)
	}
	return p
}

// oneShot reports whether some service waits for name to exit.
func oneShot(p *types.Project, name string) bool {
	for _, s := range p.Services {
		if d, ok := s.DependsOn[name]; ok && d.Condition == types.ServiceConditionCompletedSuccessfully {
			return true
		}
	}
	return false
}

// probeURL returns the URL a service's health check probes, failing unless
// the check runs the image's own probe command.
func probeURL(t *testing.T, s types.ServiceConfig) *url.URL {
	t.Helper()
	hc := s.HealthCheck
	if hc == nil || hc.Disable {
		t.Fatalf("%s: no health check", s.Name)
	}
	want := []string{"CMD", "/usr/local/bin/api", "probe"}
	if len(hc.Test) != 4 || !slices.Equal(hc.Test[:3], want) {
		t.Fatalf("%s: health check %q, want %q URL", s.Name, hc.Test, want)
	}
	u, err := url.Parse(hc.Test[3])
	if err != nil {
		t.Fatalf("%s: health check URL: %v", s.Name, err)
	}
	return u
}

func TestCompose(t *testing.T) {
	p := loadProject(t, nil)
	svc := func(t *testing.T, name string) types.ServiceConfig {
		t.Helper()
		s, ok := p.Services[name]
		if !ok {
			t.Fatalf("no service %q", name)
		}
		return s
	}
	df := readDockerfile(t)

	checks := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"our services run one image built from the repository", func(t *testing.T) {
			image := ""
			for name, s := range p.Services {
				if s.Build == nil {
					continue
				}
				if _, ok := ourServices[name]; !ok {
					t.Errorf("%s: built here but not expected", name)
				}
				if image == "" {
					image = s.Image
				}
				if s.Image == "" || s.Image != image {
					t.Errorf("%s: image %q, want one shared name (%q)", name, s.Image, image)
				}
				root, _ := filepath.Abs(repoRoot)
				if s.Build.Context != root || s.Build.Dockerfile != "deploy/compose/Dockerfile" {
					t.Errorf("%s: build %s -f %s, want %s -f deploy/compose/Dockerfile", name, s.Build.Context, s.Build.Dockerfile, root)
				}
			}
			for name, cmd := range ourServices {
				if s := svc(t, name); s.Build == nil || command(s) != cmd {
					t.Errorf("%s: command %q (built: %v), want %q from this repository's image", name, command(s), s.Build != nil, cmd)
				}
			}
		}},
		{"our commands are binaries of the image", func(t *testing.T) {
			for name := range ourServices {
				s := svc(t, name)
				bin, ok := strings.CutPrefix(s.Command[0], "/usr/local/bin/")
				if !ok || !slices.Contains(df.binaries(), bin) {
					t.Errorf("%s: runs %q, the image has %v in /usr/local/bin", name, s.Command[0], df.binaries())
				}
			}
		}},
		{"our services are locked down and not root", func(t *testing.T) {
			imageUser := df.final().last("USER")
			for name := range ourServices {
				s := svc(t, name)
				if !s.ReadOnly {
					t.Errorf("%s: root file system writable (read_only)", name)
				}
				if !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
					t.Errorf("%s: security_opt %q lacks no-new-privileges:true", name, s.SecurityOpt)
				}
				if !slices.Contains(s.CapDrop, "ALL") || len(s.CapAdd) > 0 || s.Privileged {
					t.Errorf("%s: cap_drop %q cap_add %q privileged %v, want all dropped", name, s.CapDrop, s.CapAdd, s.Privileged)
				}
				user := s.User
				if user == "" {
					user = imageUser
				}
				if isRoot(user) {
					t.Errorf("%s: runs as %q (image USER %q)", name, user, imageUser)
				}
			}
		}},
		{"servers have probe health checks and restart; one-shots do not", func(t *testing.T) {
			for name := range ourServices {
				s := svc(t, name)
				if oneShot(p, name) {
					if s.Restart != "no" {
						t.Errorf("%s: one-shot with restart %q, want no", name, s.Restart)
					}
					continue
				}
				if s.Restart != "unless-stopped" {
					t.Errorf("%s: restart %q, want unless-stopped", name, s.Restart)
				}
				u := probeURL(t, s)
				if u.Hostname() != "127.0.0.1" || u.Path != "/readyz" {
					t.Errorf("%s: probes %s, want 127.0.0.1 and /readyz", name, u)
				}
			}
		}},
		{"health checks probe the listen address", func(t *testing.T) {
			for name := range ourServices {
				s := svc(t, name)
				v, ok := listenEnv[command(s)]
				if !ok {
					continue
				}
				if got, want := probeURL(t, s).Port(), port(t, env(s, v)); got != want {
					t.Errorf("%s: probes port %s, listens on %s=%q", name, got, v, env(s, v))
				}
			}
		}},
		{"start order", func(t *testing.T) {
			for _, d := range []struct{ service, on, condition string }{
				{"seed", "seed-content", types.ServiceConditionCompletedSuccessfully},
				{"ingest", "kafka", types.ServiceConditionHealthy},
				{"ingest", "seed", types.ServiceConditionCompletedSuccessfully},
				{"consumer", "kafka", types.ServiceConditionHealthy},
				{"consumer", "clickhouse", types.ServiceConditionHealthy},
				{"api", "seed", types.ServiceConditionCompletedSuccessfully},
				{"gateway", "ingest", types.ServiceConditionHealthy},
				{"gateway", "api", types.ServiceConditionHealthy},
			} {
				got, ok := svc(t, d.service).DependsOn[d.on]
				if !ok || got.Condition != d.condition || !got.Required {
					t.Errorf("%s waits for %s: %+v (present %v), want required %s", d.service, d.on, got, ok, d.condition)
				}
			}
			for name, s := range p.Services {
				for on, d := range s.DependsOn {
					target, ok := p.Services[on]
					if !ok {
						t.Errorf("%s depends on unknown service %q", name, on)
						continue
					}
					if d.Condition == types.ServiceConditionHealthy && (target.HealthCheck == nil || target.HealthCheck.Disable) {
						t.Errorf("%s waits for %s to be healthy, which has no health check", name, on)
					}
				}
			}
		}},
		{"services reach each other where they listen", func(t *testing.T) {
			gw := svc(t, "gateway")
			for v, upstream := range map[string]string{"INGEST_URL": "ingest", "API_URL": "api"} {
				u, err := url.Parse(env(gw, v))
				if err != nil {
					t.Fatal(err)
				}
				up := svc(t, upstream)
				if want := port(t, env(up, listenEnv[command(up)])); u.Hostname() != upstream || u.Port() != want {
					t.Errorf("gateway %s=%s, want %s:%s", v, u, upstream, want)
				}
			}
			advertised := env(svc(t, "kafka"), "KAFKA_ADVERTISED_LISTENERS")
			ch := svc(t, "clickhouse")
			for name := range ourServices {
				s := svc(t, name)
				if b := env(s, "KAFKA_BROKERS"); b != "" && !strings.Contains(advertised, "://"+b) {
					t.Errorf("%s: KAFKA_BROKERS=%s, kafka advertises %s", name, b, advertised)
				}
				if a := env(s, "CLICKHOUSE_ADDR"); a != "" {
					if a != "clickhouse:9000" {
						t.Errorf("%s: CLICKHOUSE_ADDR=%s, want clickhouse:9000 (native protocol)", name, a)
					}
					for _, v := range []string{"CLICKHOUSE_USER", "CLICKHOUSE_PASSWORD"} {
						if env(s, v) != env(ch, v) || env(s, v) == "" {
							t.Errorf("%s: %s=%q, clickhouse has %q", name, v, env(s, v), env(ch, v))
						}
					}
				}
			}
		}},
		{"Prometheus scrapes the operator addresses", func(t *testing.T) { checkScrapeTargets(t, p) }},
		{"operator addresses: every server has one, read where it is served", func(t *testing.T) { checkOperatorAddrs(t, p) }},
		{"one content database on the shared volume", func(t *testing.T) {
			for name := range ourServices {
				s := svc(t, name)
				db := env(s, "CONTENT_DB")
				if db == "" {
					continue
				}
				if db != "/data/cms.db" || !hasVolume(s, "content", "/data") {
					t.Errorf("%s: CONTENT_DB=%s with volumes %+v, want /data/cms.db on volume content at /data", name, db, s.Volumes)
				}
			}
			for _, name := range []string{"seed-content", "seed", "ingest", "api"} {
				if env(svc(t, name), "CONTENT_DB") == "" {
					t.Errorf("%s: no CONTENT_DB", name)
				}
			}
			if _, ok := p.Volumes["content"]; !ok {
				t.Error("volume content not declared")
			}
		}},
		{"seed imports the bundle the image holds", func(t *testing.T) {
			s := svc(t, "seed-content")
			bundle := s.Command[len(s.Command)-1]
			if !slices.Contains(df.final().copyDests(), bundle) {
				t.Errorf("seed-content imports %s; the image copies %v", bundle, df.final().copyDests())
			}
			if !slices.Contains(svc(t, "seed").Command, "--rotate") {
				t.Error("seed does not rotate: every start would leave one more live demo token")
			}
		}},
		{"published ports bind to loopback", func(t *testing.T) {
			published := map[string]string{}
			for name, s := range p.Services {
				for _, pc := range s.Ports {
					if pc.HostIP != "127.0.0.1" {
						t.Errorf("%s: port %d published on %q, want 127.0.0.1", name, pc.Target, pc.HostIP)
					}
					published[name] = pc.Published
				}
			}
			want := map[string]string{"gateway": "8000", "api": "9080", "prometheus": "9090", "alertmanager": "9093", "grafana": "3000"}
			if !maps.Equal(published, want) {
				t.Errorf("published %v, want %v", published, want)
			}
			if got := svc(t, "gateway").Ports[0].Target; got != 8000 {
				t.Errorf("gateway publishes container port %d, listens on 8000", got)
			}
		}},
		{"bind mounts exist in the repository", func(t *testing.T) {
			dashboards, _ := filepath.Abs(filepath.Join(repoRoot, "deploy/grafana"))
			n := 0
			for name, s := range p.Services {
				for _, v := range s.Volumes {
					if v.Type != types.VolumeTypeBind {
						continue
					}
					n++
					if !v.ReadOnly {
						t.Errorf("%s: %s mounted writable", name, v.Source)
					}
					// deploy/grafana is the dashboards directory, maintained
					// beside this file; it may not exist in every checkout.
					if v.Source == dashboards {
						continue
					}
					if _, err := os.Stat(v.Source); err != nil {
						t.Errorf("%s: mount source: %v", name, err)
					}
				}
			}
			if n != 5 {
				t.Errorf("%d bind mounts, want 5 (Prometheus config and rules, Alertmanager config, Grafana provisioning and dashboards)", n)
			}
		}},
		{"Prometheus finds its rules", func(t *testing.T) {
			var cfg struct {
				RuleFiles []string `yaml:"rule_files"`
			}
			readYAML(t, filepath.Join(repoRoot, "deploy/prometheus/prometheus.yml"), &cfg)
			prom := svc(t, "prometheus")
			if !hasBind(prom, "deploy/prometheus/prometheus.yml", "/etc/prometheus/prometheus.yml") {
				t.Errorf("prometheus.yml not at /etc/prometheus/prometheus.yml: %+v", prom.Volumes)
			}
			if len(cfg.RuleFiles) == 0 {
				t.Fatal("prometheus.yml has no rule_files")
			}
			for _, rf := range cfg.RuleFiles {
				if !hasBind(prom, filepath.Join("deploy/prometheus", rf), filepath.Join("/etc/prometheus", rf)) {
					t.Errorf("rule file %s not mounted beside prometheus.yml: %+v", rf, prom.Volumes)
				}
			}
		}},
		{"Prometheus sends alerts to Alertmanager", func(t *testing.T) {
			var cfg struct {
				Alerting struct {
					Alertmanagers []struct {
						Scheme        string `yaml:"scheme"`
						PathPrefix    string `yaml:"path_prefix"`
						StaticConfigs []struct {
							Targets []string `yaml:"targets"`
						} `yaml:"static_configs"`
					} `yaml:"alertmanagers"`
				} `yaml:"alerting"`
			}
			readYAML(t, filepath.Join(repoRoot, "deploy/prometheus/prometheus.yml"), &cfg)
			var targets []string
			for _, am := range cfg.Alerting.Alertmanagers {
				if am.Scheme != "" && am.Scheme != "http" || am.PathPrefix != "" {
					t.Errorf("alertmanagers scheme %q, path_prefix %q; Alertmanager serves plain HTTP at /", am.Scheme, am.PathPrefix)
				}
				for _, sc := range am.StaticConfigs {
					targets = append(targets, sc.Targets...)
				}
			}
			if len(targets) != 1 {
				t.Fatalf("Prometheus sends alerts to %v; want the one alertmanager service", targets)
			}
			host, p, _ := net.SplitHostPort(targets[0])
			am := svc(t, host)
			if !strings.HasPrefix(am.Image, "prom/alertmanager:") {
				t.Errorf("Prometheus sends alerts to %s, which runs %s, not prom/alertmanager", host, am.Image)
			}
			if listen := port(t, flag(am.Command, "--web.listen-address", ":9093")); listen != p {
				t.Errorf("Prometheus sends alerts to port %s, Alertmanager listens on %s", p, listen)
			}
		}},
		{"Alertmanager reads its config", func(t *testing.T) {
			am := svc(t, "alertmanager")
			config := flag(am.Command, "--config.file", "/etc/alertmanager/alertmanager.yml")
			if !hasBind(am, "deploy/compose/alertmanager/alertmanager.yml", config) {
				t.Errorf("alertmanager.yml not mounted at %s, where --config.file points: %+v", config, am.Volumes)
			}
			storage := flag(am.Command, "--storage.path", "/alertmanager")
			if !hasVolume(am, "alertmanager-data", storage) {
				t.Errorf("silences are kept in %s, which is not the volume alertmanager-data: %+v", storage, am.Volumes)
			}
		}},
		{"Grafana provisioning", func(t *testing.T) {
			var ds struct {
				APIVersion  int `yaml:"apiVersion"`
				Datasources []struct {
					UID, Type, URL string
				} `yaml:"datasources"`
			}
			readYAML(t, "grafana/provisioning/datasources/prometheus.yaml", &ds)
			if ds.APIVersion != 1 || len(ds.Datasources) != 1 {
				t.Fatalf("datasources: %+v, want apiVersion 1 and one source", ds)
			}
			d := ds.Datasources[0]
			prom := svc(t, "prometheus")
			if d.UID != "prometheus" || d.Type != "prometheus" || d.URL != fmt.Sprintf("http://prometheus:%d", prom.Ports[0].Target) {
				t.Errorf("datasource %+v, want uid and type prometheus at http://prometheus:9090", d)
			}
			var dash struct {
				APIVersion int `yaml:"apiVersion"`
				Providers  []struct {
					Type    string
					Options struct{ Path string }
				} `yaml:"providers"`
			}
			readYAML(t, "grafana/provisioning/dashboards/cms.yaml", &dash)
			if dash.APIVersion != 1 || len(dash.Providers) != 1 || dash.Providers[0].Type != "file" {
				t.Fatalf("dashboard providers: %+v, want apiVersion 1 and one file provider", dash)
			}
			g := svc(t, "grafana")
			if path := dash.Providers[0].Options.Path; !hasBind(g, "deploy/grafana", path) {
				t.Errorf("provider reads %s; deploy/grafana is not mounted there: %+v", path, g.Volumes)
			}
			if !hasBind(g, "deploy/compose/grafana/provisioning", "/etc/grafana/provisioning") {
				t.Errorf("provisioning not mounted at /etc/grafana/provisioning: %+v", g.Volumes)
			}
			// The dashboards find their data source by uid.
			files, _ := filepath.Glob(filepath.Join(repoRoot, "deploy/grafana/*.json"))
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				var dashboard any
				if err := json.Unmarshal(b, &dashboard); err != nil {
					t.Errorf("%s: %v", f, err)
				}
				uids := datasourceUIDs(dashboard)
				slices.Sort(uids)
				for _, uid := range slices.Compact(uids) {
					if uid != d.UID && !strings.HasPrefix(uid, "$") {
						t.Errorf("%s: data source uid %q is not provisioned (%q is)", filepath.Base(f), uid, d.UID)
					}
				}
			}
		}},
	}
	for _, c := range checks {
		t.Run(c.name, c.check)
	}
}

// TestComposeInterpolation loads the file with the variables it documents
// set, as "docker compose config" would, and checks where they land.
func TestComposeInterpolation(t *testing.T) {
	tests := []struct {
		name                     string
		env                      map[string]string
		gatewayHost, gateway     string
		chUser, chPassword       string
		logLevel, image, grafana string
		corsOrigins              string
		alertmanager             string
	}{
		{"defaults", nil, "127.0.0.1", "8000", "cms", "cms-local", "info", "assistantcms/cms:local", "3000", "", "9093"},
		{"overrides", map[string]string{
			"GATEWAY_PUBLISH_ADDR": "0.0.0.0", "GATEWAY_PORT": "18000", "CLICKHOUSE_USER": "writer",
			"CLICKHOUSE_PASSWORD": "s3cret", "LOG_LEVEL": "debug", "CMS_IMAGE": "registry.example/cms:1.2", "GRAFANA_PORT": "13000",
			"CORS_ALLOWED_ORIGINS": "https://app.example.com", "ALERTMANAGER_PORT": "19093",
		}, "0.0.0.0", "18000", "writer", "s3cret", "debug", "registry.example/cms:1.2", "13000", "https://app.example.com", "19093"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadProject(t, tt.env)
			gw := p.Services["gateway"].Ports[0]
			if gw.HostIP != tt.gatewayHost || gw.Published != tt.gateway {
				t.Errorf("gateway published on %s:%s, want %s:%s", gw.HostIP, gw.Published, tt.gatewayHost, tt.gateway)
			}
			if got := env(p.Services["gateway"], "CORS_ALLOWED_ORIGINS"); got != tt.corsOrigins {
				t.Errorf("gateway: CORS_ALLOWED_ORIGINS=%q, want %q", got, tt.corsOrigins)
			}
			if g := p.Services["grafana"].Ports[0]; g.Published != tt.grafana || g.HostIP != "127.0.0.1" {
				t.Errorf("grafana published on %s:%s, want 127.0.0.1:%s", g.HostIP, g.Published, tt.grafana)
			}
			if a := p.Services["alertmanager"].Ports[0]; a.Published != tt.alertmanager || a.HostIP != "127.0.0.1" {
				t.Errorf("alertmanager published on %s:%s, want 127.0.0.1:%s", a.HostIP, a.Published, tt.alertmanager)
			}
			for _, name := range []string{"clickhouse", "consumer", "api"} {
				s := p.Services[name]
				if env(s, "CLICKHOUSE_USER") != tt.chUser || env(s, "CLICKHOUSE_PASSWORD") != tt.chPassword {
					t.Errorf("%s: ClickHouse credentials %q/%q, want %q/%q", name, env(s, "CLICKHOUSE_USER"), env(s, "CLICKHOUSE_PASSWORD"), tt.chUser, tt.chPassword)
				}
			}
			for name := range ourServices {
				s := p.Services[name]
				if env(s, "LOG_LEVEL") != tt.logLevel || s.Image != tt.image {
					t.Errorf("%s: LOG_LEVEL=%q image %q, want %q and %q", name, env(s, "LOG_LEVEL"), s.Image, tt.logLevel, tt.image)
				}
			}
			// The health check's variables are the container's, not the
			// file's: interpolation must leave them for its shell.
			if hc := strings.Join(p.Services["clickhouse"].HealthCheck.Test, " "); !strings.Contains(hc, `"$CLICKHOUSE_PASSWORD"`) {
				t.Errorf("clickhouse health check %q does not read the container's CLICKHOUSE_PASSWORD", hc)
			}
		})
	}
}

// TestAlertmanagerConfig checks alertmanager.yml with Alertmanager's own
// amtool, and that each severity the alerts carry reaches the receiver
// named after it.
func TestAlertmanagerConfig(t *testing.T) {
	var out strings.Builder
	amtool, err := debpkg.Ensure(t.Context(), &out, []string{"amtool"}, "prometheus-alertmanager")
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	const config = "alertmanager/alertmanager.yml"
	if b, err := exec.Command(amtool, "check-config", config).CombinedOutput(); err != nil || !strings.Contains(string(b), "SUCCESS") {
		t.Errorf("amtool check-config: %v\n%s", err, b)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, filepath.Join(repoRoot, "deploy/prometheus/alerts.yml"), &rules)
	severities := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			severities[r.Labels["severity"]] = true
		}
	}
	tests := []struct{ severity, receiver string }{
		{"critical", "critical"},
		{"warning", "warning"},
	}
	for _, tt := range tests {
		t.Run(tt.severity, func(t *testing.T) {
			delete(severities, tt.severity)
			b, err := exec.Command(amtool, "config", "routes", "test", "--config.file="+config, "severity="+tt.severity).Output()
			if got := strings.TrimSpace(string(b)); err != nil || got != tt.receiver {
				t.Errorf("an alert of severity %s goes to %q (%v), want %s", tt.severity, got, err, tt.receiver)
			}
		})
	}
	if len(severities) > 0 {
		t.Errorf("alerts.yml uses severities %v, which this test does not route", slices.Sorted(maps.Keys(severities)))
	}
}

// flag is the value of a --name=value argument, or def without one.
func flag(args []string, name, def string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return def
}

func isRoot(user string) bool {
	u, _, _ := strings.Cut(user, ":")
	return u == "" || u == "0" || u == "root"
}

func hasVolume(s types.ServiceConfig, source, target string) bool {
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeVolume && v.Source == source && v.Target == target && !v.ReadOnly {
			return true
		}
	}
	return false
}

// hasBind reports whether repoPath (relative to the repository root) is
// mounted read-only at target.
func hasBind(s types.ServiceConfig, repoPath, target string) bool {
	abs, _ := filepath.Abs(filepath.Join(repoRoot, repoPath))
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind && v.Source == abs && v.Target == target && v.ReadOnly {
			return true
		}
	}
	return false
}

// datasourceUIDs collects the uid of every "datasource" object in a
// Grafana dashboard.
func datasourceUIDs(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if ds, ok := v["datasource"].(map[string]any); ok {
			if uid, ok := ds["uid"].(string); ok {
				out = append(out, uid)
			}
		}
		for _, e := range v {
			out = append(out, datasourceUIDs(e)...)
		}
	case []any:
		for _, e := range v {
			out = append(out, datasourceUIDs(e)...)
		}
	}
	return out
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
