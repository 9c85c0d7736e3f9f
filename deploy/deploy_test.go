// Package deploy_test checks the deployment files: the Prometheus
// configuration and alerting rules with promtool, whose unit tests make
// every alert fire on a series built to trip it and stay quiet on a
// healthy one, with the labels each deployment's Prometheus gives.
package deploy_test

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/assistantcms/cms/internal/debpkg"
	"github.com/assistantcms/cms/internal/k8sbuild"
)

func TestPrometheusRules(t *testing.T) {
	promtool, err := debpkg.Find("promtool")
	if err != nil {
		t.Fatalf("%v: go run ./dev/test installs it (Debian's prometheus package)", err)
	}
	for _, args := range [][]string{
		{"check", "rules", "prometheus/alerts.yml"},
		{"check", "config", "prometheus/prometheus.yml"},
		{"test", "rules", "prometheus/alerts_test.yml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestEveryAlertIsTested holds alerts_test.yml to covering each alert.
func TestEveryAlertIsTested(t *testing.T) {
	rules := read(t, "prometheus/alerts.yml")
	tests := read(t, "prometheus/alerts_test.yml")
	n := 0
	for _, line := range strings.Split(rules, "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "- alert: ")
		if !ok {
			continue
		}
		n++
		if !strings.Contains(tests, "alertname: "+name+"\n") {
			t.Errorf("alert %s has no test in alerts_test.yml", name)
		}
	}
	if n == 0 {
		t.Fatal("no alerts found in alerts.yml")
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ruleFile is prometheus/alerts.yml as Prometheus reads it.
type ruleFile struct {
	Groups []ruleGroup `yaml:"groups"`
}

type ruleGroup struct {
	Name  string `yaml:"name"`
	Rules []rule `yaml:"rules"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	var r ruleFile
	if err := yaml.Unmarshal([]byte(read(t, "prometheus/alerts.yml")), &r); err != nil {
		t.Fatalf("prometheus/alerts.yml: %v", err)
	}
	return r
}

// runbooks is where every alert's runbook_url points, up to the anchor.
const runbooks = "https://github.com/assistantcms/cms/blob/main/docs/runbooks.md#"

// TestAlertsHaveSeverityAndRunbook holds every alert to what Alertmanager
// routes on and what the person paged reads: a severity of critical or
// warning, a summary, and a runbook section saying what to check and what
// to do.
func TestAlertsHaveSeverityAndRunbook(t *testing.T) {
	sections := markdownSections(read(t, "../docs/runbooks.md"))
	n := 0
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			n++
			t.Run(r.Alert, func(t *testing.T) {
				if s := r.Labels["severity"]; s != "critical" && s != "warning" {
					t.Errorf("severity %q; want critical or warning", s)
				}
				if strings.TrimSpace(r.Annotations["summary"]) == "" {
					t.Error("no summary")
				}
				anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbooks)
				if !ok {
					t.Fatalf("runbook_url %q; want %s<anchor>", r.Annotations["runbook_url"], runbooks)
				}
				body, ok := sections[anchor]
				if !ok {
					t.Fatalf("runbook_url anchor #%s: no such heading in docs/runbooks.md", anchor)
				}
				for _, part := range []string{"**Check**", "**Act**"} {
					if !strings.Contains(body, part) {
						t.Errorf("runbook section #%s has no %s part", anchor, part)
					}
				}
			})
		}
	}
	if n == 0 {
		t.Fatal("no alerts in prometheus/alerts.yml")
	}
}

// markdownSections maps the anchor GitHub gives each heading to the text
// under it, up to the next heading of any level.
func markdownSections(doc string) map[string]string {
	out := map[string]string{}
	anchor := ""
	for _, line := range strings.Split(doc, "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			anchor = slug(strings.TrimLeft(h, "# "))
			out[anchor] = ""
			continue
		}
		if anchor != "" {
			out[anchor] += line + "\n"
		}
	}
	return out
}

// slug is GitHub's anchor of a heading: lower case, punctuation other
// than hyphens and underscores dropped, spaces made hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// prometheusRule is the Kubernetes base's copy of alerts.yml.
const prometheusRule = "k8s/base/prometheus-rule.yaml"

// k8sBuilds are the kustomizations that ship rules and scrape targets,
// with the namespace kubectl applies an object without one to.
var k8sBuilds = []struct{ name, dir, namespace string }{
	{"base", "base", "default"},
	{"production", "overlays/production", ""},
}

// TestPrometheusRuleMatchesAlerts holds the PrometheusRule every
// Kubernetes build carries to the groups of prometheus/alerts.yml, which
// kustomize cannot read from outside deploy/k8s. UPDATE_PROMETHEUS_RULE=1
// writes it afresh first.
func TestPrometheusRuleMatchesAlerts(t *testing.T) {
	alerts := read(t, "prometheus/alerts.yml")
	if os.Getenv("UPDATE_PROMETHEUS_RULE") != "" {
		if err := os.WriteFile(prometheusRule, []byte(prometheusRuleFrom(alerts)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var want map[string]any
	if err := yaml.Unmarshal([]byte(alerts), &want); err != nil {
		t.Fatal(err)
	}
	for _, b := range k8sBuilds {
		t.Run(b.name, func(t *testing.T) {
			var found []map[string]any
			for _, o := range kustomizeBuild(t, b.dir) {
				if o.Kind != "PrometheusRule" {
					continue
				}
				var v map[string]any
				if err := yaml.Unmarshal(o.YAML, &v); err != nil {
					t.Fatal(err)
				}
				found = append(found, v)
			}
			if len(found) != 1 {
				t.Fatalf("%d PrometheusRules; want 1", len(found))
			}
			spec, _ := found[0]["spec"].(map[string]any)
			if !reflect.DeepEqual(spec["groups"], want["groups"]) {
				t.Errorf("the PrometheusRule's groups differ from prometheus/alerts.yml; run\n  UPDATE_PROMETHEUS_RULE=1 go run ./dev/test -run TestPrometheusRuleMatchesAlerts ./deploy")
			}
		})
	}
}

// prometheusRuleFrom wraps the groups of alerts.yml, comments and all, in
// a PrometheusRule. Text, not re-encoded YAML, so the copy reads the same.
func prometheusRuleFrom(alerts string) string {
	_, groups, _ := strings.Cut(alerts, "\ngroups:\n")
	var b strings.Builder
	b.WriteString(`# Generated from deploy/prometheus/alerts.yml, which explains the rules;
# change that file, then run
#   UPDATE_PROMETHEUS_RULE=1 go run ./dev/test -run TestPrometheusRuleMatchesAlerts ./deploy
# go test ./deploy fails while the two differ. Prometheus Operator loads it
# when the Prometheus resource's ruleSelector matches its labels (add the
# label yours selects on, e.g. release, in an overlay).
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: cms
  labels:
    app.kubernetes.io/component: alerts
spec:
  groups:
`)
	for _, line := range strings.SplitAfter(groups, "\n") {
		if strings.TrimSpace(line) != "" {
			b.WriteString("  ")
		}
		b.WriteString(line)
	}
	return b.String()
}

// kustomizeBuild builds k8s/<dir> in memory, as go test ./deploy/k8s does.
func kustomizeBuild(t *testing.T, dir string) []k8sbuild.Resource {
	t.Helper()
	res, err := k8sbuild.Build("k8s", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// target is one scrape target: the service whose metrics it serves
// (ingest, consumer, api, gateway) and the labels Prometheus gives them.
type target struct {
	service string
	labels  map[string]string
}

// composeTargets renders the targets of prometheus/prometheus.yml; the
// service is the compose service the address names.
func composeTargets(t *testing.T) []target {
	t.Helper()
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string          `yaml:"targets"`
				Labels  map[string]string `yaml:"labels"`
			} `yaml:"static_configs"`
			Relabel       []any `yaml:"relabel_configs"`
			MetricRelabel []any `yaml:"metric_relabel_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(read(t, "prometheus/prometheus.yml")), &cfg); err != nil {
		t.Fatal(err)
	}
	var out []target
	for _, sc := range cfg.ScrapeConfigs {
		if len(sc.Relabel)+len(sc.MetricRelabel) > 0 {
			t.Fatalf("job %s relabels, which these tests do not render", sc.JobName)
		}
		for _, st := range sc.StaticConfigs {
			for _, addr := range st.Targets {
				labels := map[string]string{"job": sc.JobName, "instance": addr}
				maps.Copy(labels, st.Labels)
				host, _, _ := strings.Cut(addr, ":")
				out = append(out, target{host, labels})
			}
		}
	}
	return out
}

type k8sMeta struct {
	Name      string            `yaml:"name"`
	Namespace string            `yaml:"namespace"`
	Labels    map[string]string `yaml:"labels"`
}

type k8sServiceMonitor struct {
	Metadata k8sMeta `yaml:"metadata"`
	Spec     struct {
		JobLabel          string   `yaml:"jobLabel"`
		TargetLabels      []string `yaml:"targetLabels"`
		PodTargetLabels   []string `yaml:"podTargetLabels"`
		NamespaceSelector any      `yaml:"namespaceSelector"`
		Selector          struct {
			MatchLabels      map[string]string `yaml:"matchLabels"`
			MatchExpressions []any             `yaml:"matchExpressions"`
		} `yaml:"selector"`
		Endpoints []struct {
			Port          string `yaml:"port"`
			TargetPort    any    `yaml:"targetPort"`
			HonorLabels   bool   `yaml:"honorLabels"`
			Relabel       []any  `yaml:"relabelings"`
			MetricRelabel []any  `yaml:"metricRelabelings"`
		} `yaml:"endpoints"`
	} `yaml:"spec"`
}

type k8sService struct {
	Metadata k8sMeta `yaml:"metadata"`
	Spec     struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type k8sWorkload struct {
	Metadata k8sMeta `yaml:"metadata"`
	Spec     struct {
		Template struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     struct {
				Containers []struct {
					Name  string `yaml:"name"`
					Ports []struct {
						Name          string `yaml:"name"`
						ContainerPort int    `yaml:"containerPort"`
					} `yaml:"ports"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// podsPerWorkload is how many pods each workload is rendered with, so
// that alerts are seen to aggregate over pods.
const podsPerWorkload = 2

// k8sTargets renders the targets Prometheus Operator derives from the
// build's ServiceMonitors, as its generated scrape configuration labels
// them: job (the Service's name, or its jobLabel label's value), namespace,
// service, endpoint, pod, container and instance (pod IP and port). The
// service of a target is its pods' app.kubernetes.io/component. Settings
// these tests do not render fail the test rather than pass unseen.
func k8sTargets(t *testing.T, dir, defaultNamespace string) []target {
	t.Helper()
	var monitors []k8sServiceMonitor
	var services []k8sService
	var workloads []k8sWorkload
	for _, o := range kustomizeBuild(t, dir) {
		var err error
		switch o.Kind {
		case "ServiceMonitor":
			monitors = append(monitors, k8sServiceMonitor{})
			err = yaml.Unmarshal(o.YAML, &monitors[len(monitors)-1])
		case "Service":
			services = append(services, k8sService{})
			err = yaml.Unmarshal(o.YAML, &services[len(services)-1])
		case "Deployment", "StatefulSet":
			workloads = append(workloads, k8sWorkload{})
			err = yaml.Unmarshal(o.YAML, &workloads[len(workloads)-1])
		}
		if err != nil {
			t.Fatalf("decode a %s: %v", o.Kind, err)
		}
	}
	subset := func(sel, labels map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	var out []target
	for _, m := range monitors {
		sm := m.Spec
		if len(sm.Selector.MatchExpressions)+len(sm.TargetLabels)+len(sm.PodTargetLabels) > 0 || sm.NamespaceSelector != nil {
			t.Fatalf("ServiceMonitor %s: matchExpressions, targetLabels, podTargetLabels and namespaceSelector are not rendered here", m.Metadata.Name)
		}
		for _, s := range services {
			if s.Metadata.Namespace != m.Metadata.Namespace || !subset(sm.Selector.MatchLabels, s.Metadata.Labels) {
				continue
			}
			var w *k8sWorkload
			for i := range workloads {
				if subset(s.Spec.Selector, workloads[i].Spec.Template.Metadata.Labels) {
					w = &workloads[i]
				}
			}
			if w == nil {
				t.Fatalf("Service %s selects no workload", s.Metadata.Name)
			}
			for _, e := range sm.Endpoints {
				if e.Port == "" || e.TargetPort != nil || e.HonorLabels || len(e.Relabel)+len(e.MetricRelabel) > 0 {
					t.Fatalf("ServiceMonitor %s: only endpoints naming a Service port, without relabelling or honorLabels, are rendered here", m.Metadata.Name)
				}
				var targetPort any
				for _, p := range s.Spec.Ports {
					if p.Name == e.Port {
						targetPort = p.TargetPort
						if targetPort == nil {
							targetPort = p.Port
						}
					}
				}
				container, port := "", 0
				for _, c := range w.Spec.Template.Spec.Containers {
					for _, cp := range c.Ports {
						if cp.Name == targetPort || cp.ContainerPort == targetPort {
							container, port = c.Name, cp.ContainerPort
						}
					}
				}
				if port == 0 {
					t.Fatalf("ServiceMonitor %s: Service %s port %q reaches no container port", m.Metadata.Name, s.Metadata.Name, e.Port)
				}
				job := s.Metadata.Name
				if v := s.Metadata.Labels[sm.JobLabel]; sm.JobLabel != "" && v != "" {
					job = v
				}
				ns := firstSet(s.Metadata.Namespace, defaultNamespace)
				for i := 1; i <= podsPerWorkload; i++ {
					out = append(out, target{w.Spec.Template.Metadata.Labels["app.kubernetes.io/component"], map[string]string{
						"job": job, "namespace": ns, "service": s.Metadata.Name, "endpoint": e.Port,
						"pod": fmt.Sprintf("%s-%d", w.Metadata.Name, i), "container": container,
						"instance": fmt.Sprintf("10.0.0.%d:%d", i, port),
					}})
				}
			}
		}
	}
	return out
}

// firstSet is the first of its arguments that is not empty.
func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// series is one input series of a promtool test, before the target's
// labels are added.
type series struct {
	name   string
	labels map[string]string
	values string
}

// alertCase trips one alert with the metrics of one service, and keeps it
// quiet with healthy ones.
type alertCase struct {
	alert, service string
	at             string // the evaluation time at which it fires
	trigger        []series
	healthy        []series
	// labels are those the alert carries besides severity, job and
	// namespace; perTarget alerts keep every label of the target.
	labels    map[string]string
	perTarget bool
}

func ingestRequests(code5xx string) []series {
	return []series{
		{"cms_ingest_http_requests_total", map[string]string{"route": "/cms/app/events", "code": "200"}, "0+600x30"},
		{"cms_ingest_http_requests_total", map[string]string{"route": "/cms/app/events", "code": "503"}, code5xx},
	}
}

// buckets is a histogram whose observations all fall at or under
// below, and above the buckets before it.
func buckets(name string, bounds []string, below string) []series {
	var out []series
	count := "0x40"
	for _, le := range append(bounds, "+Inf") {
		if le == below {
			count = "0+100x40"
		}
		out = append(out, series{name, map[string]string{"le": le}, count})
	}
	return out
}

func alertCases() []alertCase {
	events := func(accepted, rejected string) []series {
		return []series{
			{"cms_ingest_events_total", map[string]string{"outcome": "accepted"}, accepted},
			{"cms_ingest_events_total", map[string]string{"outcome": "rejected"}, rejected},
		}
	}
	produce := []string{"0.1", "0.5", "1"}
	freshness := []string{"0.8", "1.6", "3.2"}
	latency := []string{"0.1", "0.5"}
	cases := []alertCase{
		{alert: "IngestHigh5xxRatio", service: "ingest", at: "20m",
			trigger: ingestRequests("0+60x30"), healthy: ingestRequests("0+1x30")},
		{alert: "IngestProduceLatencyHigh", service: "ingest", at: "20m",
			trigger: buckets("cms_ingest_produce_duration_seconds_bucket", produce, "1"),
			healthy: buckets("cms_ingest_produce_duration_seconds_bucket", produce, "0.1")},
		{alert: "IngestQuarantineRateHigh", service: "ingest", at: "40m",
			trigger: events("0+1000x60", "0+100x60"), healthy: events("0+1000x60", "0+10x60")},
		{alert: "IngestQuarantineReason", service: "ingest", at: "40m", labels: map[string]string{"reason": "wrong_type"},
			trigger: append(events("0+1000x60", "0+20x60"),
				series{"cms_ingest_events_rejected_total", map[string]string{"reason": "wrong_type", "field": "sessionId"}, "0+20x60"}),
			healthy: append(events("0+1000x60", "0+5x60"),
				series{"cms_ingest_events_rejected_total", map[string]string{"reason": "wrong_type", "field": "sessionId"}, "0+5x60"})},
		{alert: "IngestTrafficStopped", service: "ingest", at: "85m",
			trigger: events("0+120x60 7200x40", "0x100"), healthy: events("0+120x100", "0x100")},
		{alert: "ConsumerLagGrowing", service: "consumer", at: "40m",
			trigger: []series{{"cms_consumer_lag_messages", map[string]string{"topic": "cms.events", "partition": "0"}, "20000+500x60"}},
			healthy: []series{{"cms_consumer_lag_messages", map[string]string{"topic": "cms.events", "partition": "0"}, "20000x60"}}},
		{alert: "ClickHouseInsertFailures", service: "consumer", at: "20m",
			trigger: []series{{"cms_consumer_retries_total", map[string]string{"operation": "insert"}, "0+2x30"}},
			healthy: []series{{"cms_consumer_retries_total", map[string]string{"operation": "insert"}, "0x30"}}},
		{alert: "ConsumerDeadLetters", service: "consumer", at: "6m",
			trigger: []series{{"cms_consumer_dead_letters_total", nil, "0 0 0 0 3x20"}},
			healthy: []series{{"cms_consumer_dead_letters_total", nil, "0x20"}}},
		{alert: "EventFreshnessSlow", service: "consumer", at: "30m",
			trigger: buckets("cms_consumer_freshness_seconds_bucket", freshness, "3.2"),
			healthy: buckets("cms_consumer_freshness_seconds_bucket", freshness, "0.8")},
		{alert: "APIHighP99Latency", service: "api", at: "20m", labels: map[string]string{"route": "/cms/search"},
			trigger: withLabels(buckets("cms_api_request_duration_seconds_bucket", latency, "0.5"), "route", "/cms/search", "method", "GET"),
			healthy: withLabels(buckets("cms_api_request_duration_seconds_bucket", latency, "0.1"), "route", "/cms/search", "method", "GET")},
		{alert: "APIHigh5xxRatio", service: "api", at: "20m",
			trigger: []series{
				{"cms_api_requests_total", map[string]string{"route": "/cms/search", "method": "GET", "code": "200"}, "0+600x30"},
				{"cms_api_requests_total", map[string]string{"route": "/cms/search", "method": "GET", "code": "500"}, "0+60x30"}},
			healthy: []series{
				{"cms_api_requests_total", map[string]string{"route": "/cms/search", "method": "GET", "code": "200"}, "0+600x30"},
				{"cms_api_requests_total", map[string]string{"route": "/cms/search", "method": "GET", "code": "500"}, "0+1x30"}}},
		{alert: "GatewayUpstreamErrors", service: "gateway", at: "20m", labels: map[string]string{"upstream": "ingest"},
			trigger: []series{
				{"cms_gateway_requests_total", map[string]string{"upstream": "ingest", "code": "200"}, "0+600x30"},
				{"cms_gateway_requests_total", map[string]string{"upstream": "ingest", "code": "503"}, "0+60x30"},
				{"cms_gateway_requests_total", map[string]string{"upstream": "api", "code": "200"}, "0+600x30"}},
			healthy: []series{
				{"cms_gateway_requests_total", map[string]string{"upstream": "ingest", "code": "200"}, "0+600x30"},
				{"cms_gateway_requests_total", map[string]string{"upstream": "ingest", "code": "503"}, "0+10x30"}}},
	}
	for _, svc := range []string{"ingest", "consumer", "api", "gateway"} {
		cases = append(cases, alertCase{alert: "ServiceDown", service: svc, at: "5m", perTarget: true,
			trigger: []series{{"up", nil, "0x10"}}, healthy: []series{{"up", nil, "1x10"}}})
	}
	return cases
}

// withLabels adds name/value pairs to every series.
func withLabels(ss []series, pairs ...string) []series {
	for i := range ss {
		l := maps.Clone(ss[i].labels)
		for j := 0; j+1 < len(pairs); j += 2 {
			l[pairs[j]] = pairs[j+1]
		}
		ss[i].labels = l
	}
	return ss
}

// selector writes a series as promtool reads it, name{label="value",...}.
func selector(name string, labels ...map[string]string) string {
	all := map[string]string{}
	for _, l := range labels {
		maps.Copy(all, l)
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(all)) {
		parts = append(parts, k+"="+strconv.Quote(all[k]))
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

type promtoolFile struct {
	RuleFiles          []string        `yaml:"rule_files"`
	EvaluationInterval string          `yaml:"evaluation_interval"`
	Tests              []promtoolGroup `yaml:"tests"`
}

type promtoolGroup struct {
	Interval    string            `yaml:"interval"`
	InputSeries []promtoolSeries  `yaml:"input_series"`
	AlertTests  []promtoolAlertAt `yaml:"alert_rule_test"`
}

type promtoolSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type promtoolAlertAt struct {
	EvalTime  string          `yaml:"eval_time"`
	Alertname string          `yaml:"alertname"`
	ExpAlerts []promtoolAlert `yaml:"exp_alerts"`
}

type promtoolAlert struct {
	ExpLabels map[string]string `yaml:"exp_labels"`
}

// TestAlertsFireOnEveryDeployment renders the scrape targets of compose's
// Prometheus and of each Kubernetes build, labels the series of every
// alert's trigger and healthy cases as that deployment would, and runs
// them through promtool: each alert must fire with the deployment's job
// and namespace (and, per target, its instance) and stay quiet otherwise.
// The annotations are left to alerts_test.yml, so the rules are loaded
// without them.
func TestAlertsFireOnEveryDeployment(t *testing.T) {
	promtool, err := debpkg.Find("promtool")
	if err != nil {
		t.Fatalf("%v: go run ./dev/test installs it (Debian's prometheus package)", err)
	}
	all := readRules(t)
	severity := map[string]string{}
	for i, g := range all.Groups {
		for j, r := range g.Rules {
			severity[r.Alert] = r.Labels["severity"]
			all.Groups[i].Rules[j].Annotations = nil
		}
	}
	bare, err := yaml.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), bare, 0o644); err != nil {
		t.Fatal(err)
	}

	deployments := []struct {
		name    string
		targets []target
	}{{"compose", composeTargets(t)}}
	for _, b := range k8sBuilds {
		deployments = append(deployments, struct {
			name    string
			targets []target
		}{"kubernetes " + b.name, k8sTargets(t, b.dir, b.namespace)})
	}

	exercised := map[string]bool{}
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			if len(d.targets) == 0 {
				t.Fatal("no scrape targets")
			}
			file := promtoolFile{RuleFiles: []string{"rules.yml"}, EvaluationInterval: "1m"}
			for _, c := range alertCases() {
				var targets []target
				for _, tg := range d.targets {
					if tg.service == c.service {
						targets = append(targets, tg)
					}
				}
				if len(targets) == 0 {
					t.Logf("%s: no %s here, so %s is not evaluated", d.name, c.service, c.alert)
					continue
				}
				exercised[c.alert] = true
				var want []promtoolAlert
				seen := map[string]bool{}
				for _, tg := range targets {
					l := map[string]string{"severity": severity[c.alert]}
					maps.Copy(l, c.labels)
					if c.perTarget {
						maps.Copy(l, tg.labels)
					} else {
						for _, k := range []string{"job", "namespace"} {
							if v, ok := tg.labels[k]; ok {
								l[k] = v
							}
						}
					}
					if key := selector("", l); !seen[key] {
						seen[key] = true
						want = append(want, promtoolAlert{l})
					}
				}
				for _, run := range []struct {
					input []series
					want  []promtoolAlert
				}{{c.trigger, want}, {c.healthy, []promtoolAlert{}}} {
					g := promtoolGroup{Interval: "1m", AlertTests: []promtoolAlertAt{{c.at, c.alert, run.want}}}
					for _, tg := range targets {
						for _, s := range run.input {
							g.InputSeries = append(g.InputSeries, promtoolSeries{selector(s.name, tg.labels, s.labels), s.values})
						}
					}
					file.Tests = append(file.Tests, g)
				}
			}
			b, err := yaml.Marshal(file)
			if err != nil {
				t.Fatal(err)
			}
			tests := filepath.Join(dir, strings.ReplaceAll(d.name, " ", "-")+"_test.yml")
			if err := os.WriteFile(tests, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(promtool, "test", "rules", tests).CombinedOutput(); err != nil || !strings.Contains(string(out), "SUCCESS") {
				t.Errorf("promtool test rules, series labelled as on %s: %v\n%s\ntests:\n%s", d.name, err, out, b)
			}
		})
	}
	for name := range severity {
		if !exercised[name] {
			t.Errorf("alert %s has no case in alertCases()", name)
		}
	}
}
