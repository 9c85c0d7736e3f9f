// Package deploy_test checks the deployment files: the Prometheus
// configuration and alerting rules with promtool, whose unit tests make
// every alert fire on a series built to trip it and stay quiet on a
// healthy one.
package deploy_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/assistantcms/cms/internal/debpkg"
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
