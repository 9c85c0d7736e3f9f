// Package statuspage serves a small page of live counters and charts drawn
// from the services' own Prometheus metrics, so that a person running the
// product without Grafana can watch events flow in a browser. The api
// serves it at /status; a sampler reads every source at a fixed interval
// and keeps a few minutes of history, so the page shows data as soon as it
// opens.
//
// It lives under pkg/operator, apart from the HTTP plumbing of pkg/edge:
// an operator page knows the product (which metrics matter, how to chart
// them), while the plumbing every service serves with knows none of it.
// The api's command mounts it beside the content routes.
package statuspage

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Source is one service's metrics.
type Source struct {
	Name   string
	Gather func(ctx context.Context) (map[string]*dto.MetricFamily, error)
}

// Local reads a registry in this process.
func Local(name string, g prometheus.Gatherer) Source {
	return Source{Name: name, Gather: func(context.Context) (map[string]*dto.MetricFamily, error) {
		fams, err := g.Gather()
		if err != nil {
			return nil, fmt.Errorf("gather %s metrics: %w", name, err)
		}
		byName := make(map[string]*dto.MetricFamily, len(fams))
		for _, f := range fams {
			byName[f.GetName()] = f
		}
		return byName, nil
	}}
}

// Remote scrapes a service's /metrics in the Prometheus text format.
func Remote(name, metricsURL string, client *http.Client) Source {
	return Source{Name: name, Gather: func(ctx context.Context) (map[string]*dto.MetricFamily, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", name, err)
		}
		// Ask for text: the parser reads only that format.
		req.Header.Set("Accept", "text/plain;version=0.0.4")
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", name, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("scrape %s: %s answered %s", name, metricsURL, resp.Status)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: parse %s: %w", name, metricsURL, err)
		}
		return fams, nil
	}}
}

// ParseSources reads "name=url,name=url", the form of STATUS_SOURCES.
func ParseSources(spec string, client *http.Client) ([]Source, error) {
	var out []Source
	seen := map[string]bool{}
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, raw, ok := strings.Cut(item, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("status source %q: want name=url", item)
		}
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("status source %s: %w", name, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("status source %s: %q is not an http(s) URL", name, raw)
		}
		if seen[name] {
			return nil, fmt.Errorf("status source %s named twice", name)
		}
		seen[name] = true
		out = append(out, Remote(name, raw, client))
	}
	return out, nil
}
