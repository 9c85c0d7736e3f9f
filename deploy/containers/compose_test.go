package containers_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestCompose brings up compose.yaml as a user does (docker compose up),
// with only the images no registry serves here replaced, and uses it: the
// reference client's runtime reads content and sends its turns through the
// published gateway, every event lands in ClickHouse, also across a stop
// of the consumer, the operator's status page answers, Prometheus scrapes
// every service and loads the rules, and docker compose down leaves
// nothing behind.
func TestCompose(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	d := newDeployment(t, "../compose/compose.yaml", "testdata/compose.standins.yaml")
	downed := false
	t.Cleanup(func() {
		if t.Failed() {
			d.logState(t)
		}
		if !downed {
			d.down(context.Background(), t)
		}
	})
	d.up(ctx, t)
	gateway := "127.0.0.1:" + strconv.Itoa(d.ports["GATEWAY_PORT"])

	t.Run("every service healthy, the seeds completed", func(t *testing.T) {
		cs := d.containers(ctx, t)
		for _, s := range []string{"kafka", "clickhouse", "ingest", "consumer", "api", "gateway", "prometheus", "alertmanager"} {
			if c := cs[s]; c.State != "running" || c.Health != "healthy" {
				t.Errorf("%s: %s, %q; want running and healthy", s, c.State, c.Health)
			}
		}
		for _, s := range []string{"seed-content", "seed"} {
			if c := cs[s]; c.State != "exited" || c.ExitCode != 0 {
				t.Errorf("%s: %s with code %d; want exited with 0", s, c.State, c.ExitCode)
			}
		}
		if _, ok := cs["grafana"]; ok {
			t.Error("grafana ran; the stand-ins leave it out")
		}
		checkPublished(t, cs)
	})

	t.Run("our services run as nonroot on a read-only root", func(t *testing.T) {
		cs := d.containers(ctx, t)
		for _, s := range ourServices {
			t.Run(s, func(t *testing.T) { checkHardened(ctx, t, cs[s].ID) })
		}
	})

	token := d.demoToken(ctx, t)
	sent := 0
	t.Run("the runtime's events land in ClickHouse", func(t *testing.T) {
		m, accepted, rejected := runtime(ctx, t, gateway, token)
		if m.Reads == nil || len(m.Reads.Handlers) == 0 || m.Reads.Handler == "" || m.Reads.Documents == 0 || m.Reads.FAQs == 0 {
			t.Errorf("the runtime read %+v; want handlers, a handler, documents and FAQs of the demo content", m.Reads)
		}
		if rejected != 0 {
			t.Errorf("ingest rejected %d events", rejected)
		}
		sent += accepted
		waitRows(ctx, t, d, "clickhouse", m.SessionID, accepted)
	})

	t.Run("the status page sees every service", func(t *testing.T) {
		status := "http://127.0.0.1:" + strconv.Itoa(d.ports["STATUS_PORT"])
		if code := getJSON(ctx, t, status+"/status", nil); code != http.StatusOK {
			t.Errorf("GET /status: %d", code)
		}
		var data struct {
			Sources []struct {
				Name     string
				Up       bool
				Revision string
			}
			Counters []struct {
				Label string
				Value float64
			}
		}
		// The page reads the services' metrics every few seconds.
		accepted := -1
		waitFor(t, time.Minute, fmt.Sprintf("%d events accepted on the status page", sent), func() bool {
			if code := getJSON(ctx, t, status+"/status/data", &data); code != http.StatusOK {
				t.Fatalf("GET /status/data: %d", code)
			}
			for _, c := range data.Counters {
				if c.Label == "Events accepted" {
					accepted = int(c.Value)
				}
			}
			return accepted == sent
		})
		var names []string
		for _, s := range data.Sources {
			names = append(names, s.Name)
			if !s.Up || s.Revision != "containertest" {
				t.Errorf("source %s: up %v, revision %q; want up, built at containertest", s.Name, s.Up, s.Revision)
			}
		}
		slices.Sort(names)
		if want := []string{"api", "consumer", "gateway", "ingest"}; !slices.Equal(names, want) {
			t.Errorf("sources %v, want %v", names, want)
		}
	})

	t.Run("Prometheus scrapes every service and loads the rules", func(t *testing.T) {
		checkPrometheus(ctx, t, "http://127.0.0.1:"+strconv.Itoa(d.ports["PROMETHEUS_PORT"]), []string{"api", "consumer", "gateway", "ingest"})
		if code := getJSON(ctx, t, "http://127.0.0.1:"+strconv.Itoa(d.ports["ALERTMANAGER_PORT"])+"/-/ready", nil); code != http.StatusOK {
			t.Errorf("Alertmanager /-/ready: %d", code)
		}
	})

	t.Run("a stopped consumer loses nothing", func(t *testing.T) {
		d.compose(ctx, t, "stop", "consumer")
		m, accepted, _ := runtime(ctx, t, gateway, token)
		// Held by the broker while no consumer reads.
		if rows, _ := d.sessionRows(ctx, t, "clickhouse", "events", m.SessionID); rows != 0 {
			t.Fatalf("%d rows written with the consumer stopped", rows)
		}
		d.compose(ctx, t, "start", "consumer")
		waitRows(ctx, t, d, "clickhouse", m.SessionID, accepted)
	})

	t.Run("down leaves nothing behind", func(t *testing.T) {
		d.down(ctx, t)
		downed = true
		checkNothingLeft(ctx, t)
	})
}

// checkNothingLeft checks that the engine holds no container, volume or
// network but its own.
func checkNothingLeft(ctx context.Context, t *testing.T) {
	t.Helper()
	if ids := lines(docker(ctx, t, "ps", "--all", "--quiet")); len(ids) != 0 {
		t.Errorf("containers left: %v", ids)
	}
	if vs := lines(docker(ctx, t, "volume", "ls", "--quiet")); len(vs) != 0 {
		t.Errorf("volumes left: %v", vs)
	}
	nets := lines(docker(ctx, t, "network", "ls", "--format", "{{.Name}}"))
	slices.Sort(nets)
	if want := []string{"host", "none"}; !slices.Equal(nets, want) {
		t.Errorf("networks %v, want only the engine's own %v", nets, want)
	}
}

// checkPublished checks that every published port is bound to loopback
// only, as compose.yaml promises unless GATEWAY_PUBLISH_ADDR says otherwise.
func checkPublished(t *testing.T, cs map[string]container) {
	t.Helper()
	published := 0
	for _, c := range cs {
		for _, p := range c.Publishers {
			if p.PublishedPort == 0 {
				continue
			}
			published++
			if p.URL != "127.0.0.1" {
				t.Errorf("%s publishes port %d on %q, want 127.0.0.1 only", c.Service, p.PublishedPort, p.URL)
			}
		}
	}
	// The gateway, the status page, Prometheus and Alertmanager.
	if published != 4 {
		t.Errorf("%d ports published, want 4", published)
	}
}

// waitRows waits until the session's events are rows of ClickHouse, each
// once.
func waitRows(ctx context.Context, t *testing.T, d *deployment, service, session string, want int) {
	t.Helper()
	var rows, unique int
	waitFor(t, 2*time.Minute, fmt.Sprintf("%d rows of session %s", want, session), func() bool {
		rows, unique = d.sessionRows(ctx, t, service, "events", session)
		return rows >= want
	})
	if rows != want || unique != want {
		t.Errorf("session %s: %d rows, %d distinct events; want %d of each", session, rows, unique, want)
	}
}

// checkPrometheus waits until Prometheus has scraped every job with
// up == 1 and evaluated every rule of deploy/prometheus/alerts.yml without
// error, and sees one Alertmanager.
func checkPrometheus(ctx context.Context, t *testing.T, base string, jobs []string) {
	t.Helper()
	var up struct {
		Data struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	var scraped []string
	waitFor(t, 2*time.Minute, fmt.Sprintf("up == 1 for %v", jobs), func() bool {
		getJSON(ctx, t, base+"/api/v1/query?query=up", &up)
		scraped = scraped[:0]
		for _, r := range up.Data.Result {
			if r.Value[1] == "1" {
				scraped = append(scraped, r.Metric["job"])
			}
		}
		slices.Sort(scraped)
		return slices.Equal(scraped, jobs)
	})

	b, err := os.ReadFile(repoRoot + "/deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []map[string]any
		}
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, g := range file.Groups {
		want += len(g.Rules)
	}
	var rules struct {
		Data struct {
			Groups []struct {
				Name  string
				Rules []struct {
					Name      string
					Health    string
					LastError string
				}
			}
		}
	}
	var ok, loaded int
	waitFor(t, 2*time.Minute, fmt.Sprintf("%d rules evaluated", want), func() bool {
		getJSON(ctx, t, base+"/api/v1/rules", &rules)
		ok, loaded = 0, 0
		for _, g := range rules.Data.Groups {
			for _, r := range g.Rules {
				loaded++
				switch r.Health {
				case "ok":
					ok++
				case "err":
					t.Fatalf("rule %s of %s: %s", r.Name, g.Name, r.LastError)
				}
			}
		}
		return loaded == want && ok == want
	})

	var ams struct {
		Data struct {
			ActiveAlertmanagers []struct{ URL string }
		}
	}
	getJSON(ctx, t, base+"/api/v1/alertmanagers", &ams)
	if len(ams.Data.ActiveAlertmanagers) != 1 {
		t.Errorf("Prometheus sends alerts to %v, want one Alertmanager", ams.Data.ActiveAlertmanagers)
	}
}
