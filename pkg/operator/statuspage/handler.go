package statuspage

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"time"
)

//go:embed status.html
var page []byte

// PageHandler serves the page; it reads DataPath itself.
func PageHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		// The page is self-contained: no script or style from elsewhere.
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
		_, _ = w.Write(page)
	})
}

// Path and DataPath are where the api serves the page and its numbers.
const (
	Path     = "/status"
	DataPath = "/status/data"
)

// DefaultInterval is how often the sampler reads its sources when nothing
// else is configured.
const DefaultInterval = 2 * time.Second

// DataHandler serves the snapshot the page polls.
func (s *Sampler) DataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(s.Snapshot())
	})
}
