// Package analyticspage is the api's /analytics page: an app's
// conversations, turns, intents, unanswered questions and session
// outcomes over a range of days, read from the ClickHouse rollups and
// drawn on the server as HTML with inline SVG, without scripts, so that
// it shows in any browser and in a screenshot as served.
//
// It lives under pkg/operator, apart from the HTTP plumbing of pkg/edge:
// it reads the pipeline's ClickHouse store, which neither the plumbing
// nor the content API may import. The api's command mounts it beside the
// content routes.
package analyticspage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/pipeline/analyticsreport"
)

// Path and DataPath are where the api serves the page and its report as
// JSON.
const (
	Path     = "/analytics"
	DataPath = "/analytics/data"
)

// Days a page covers: DefaultDays without a days parameter, at most
// MaxDays (a year, leap day included).
const (
	DefaultDays = 30
	MaxDays     = 366
)

// maxAppID bounds the app parameter; app IDs are short slugs.
const maxAppID = 200

// maxApps is how many apps the page lists to choose from.
const maxApps = 100

// queryTimeout bounds the reads of one request, so that a stuck
// ClickHouse answers the page with an error rather than never.
const queryTimeout = 15 * time.Second

// Source reads the rollups; *ClickHouse satisfies it.
type Source interface {
	Report(ctx context.Context, appID string, from, to time.Time) (analyticsreport.Report, error)
	ReportApps(ctx context.Context, from, to time.Time, limit int) ([]string, error)
}

// Handler serves the page and its data from a Source.
type Handler struct {
	src Source
	log *slog.Logger
	// now is the clock the days end on; tests set it.
	now func() time.Time
}

// New returns the handlers of src. A nil src (no ClickHouse configured)
// answers every request 503, saying what is missing.
func New(src Source, log *slog.Logger) *Handler {
	return &Handler{src: src, log: log, now: time.Now}
}

// unconfigured is what the page says without ClickHouse.
const unconfigured = "Analytics read the ClickHouse rollups, and this api has no ClickHouse: start it with CLICKHOUSE_ADDR (-clickhouse-addr)."

// unreadable is what the page says when ClickHouse fails; the error
// itself goes to the log.
const unreadable = "The analytics could not be read from ClickHouse; retry shortly."

// params are a request's choices.
type params struct {
	app  string
	days int
}

// paramError is a parameter that cannot be used, and why.
type paramError struct {
	field, msg string
}

func (e *paramError) Error() string { return e.field + ": " + e.msg }

// parseParams reads app (optional: none lists the apps) and days
// (default DefaultDays, 1 to MaxDays).
func parseParams(q url.Values) (params, error) {
	p := params{app: q.Get("app"), days: DefaultDays}
	switch {
	case len(p.app) > maxAppID:
		return p, &paramError{"app", fmt.Sprintf("The app ID is %d bytes long; app IDs have at most %d.", len(p.app), maxAppID)}
	case !utf8.ValidString(p.app):
		return p, &paramError{"app", "The app ID is not valid UTF-8."}
	}
	for _, r := range p.app {
		if unicode.IsControl(r) {
			return p, &paramError{"app", "The app ID holds a control character."}
		}
	}
	if s := q.Get("days"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxDays {
			return p, &paramError{"days", fmt.Sprintf("days is %q: want a whole number from 1 to %d.", s, MaxDays)}
		}
		p.days = n
	}
	return p, nil
}

// dayRange is the days a request covers: days of them, ending today.
func (h *Handler) dayRange(days int) (from, to time.Time) {
	y, m, d := h.now().UTC().Date()
	to = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	return to.AddDate(0, 0, 1-days), to
}

// PageHandler serves the HTML page.
func (h *Handler) PageHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := parseParams(r.URL.Query())
		v := view{App: p.app, Days: p.days, DefaultDays: DefaultDays, MaxDays: MaxDays}
		switch {
		case h.src == nil:
			v.Problem = unconfigured
			h.writePage(w, http.StatusServiceUnavailable, v)
			return
		case err != nil:
			v.Problem = err.Error()
			var pe *paramError
			if errors.As(err, &pe) {
				v.Problem = pe.msg
			}
			h.writePage(w, http.StatusBadRequest, v)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
		defer cancel()
		from, to := h.dayRange(p.days)
		v.From, v.To = from.Format(time.DateOnly), to.Format(time.DateOnly)
		if p.app != "" {
			rep, err := h.src.Report(ctx, p.app, from, to)
			if err != nil {
				h.failed(w, r, err, &v)
				return
			}
			if hasData(rep) {
				v.draw(rep)
				h.writePage(w, http.StatusOK, v)
				return
			}
			v.Notice = fmt.Sprintf("App %q has no events from %s to %s.", p.app, v.From, v.To)
		}
		// No app, or one without data: the apps that have some.
		if v.Apps, err = h.src.ReportApps(ctx, from, to, maxApps); err != nil {
			h.failed(w, r, err, &v)
			return
		}
		h.writePage(w, http.StatusOK, v)
	})
}

// DataHandler serves the report the page draws, as JSON.
func (h *Handler) DataHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if h.src == nil {
			httpserve.Error(w, http.StatusServiceUnavailable, "", unconfigured)
			return
		}
		p, err := parseParams(r.URL.Query())
		var pe *paramError
		if errors.As(err, &pe) {
			httpserve.Error(w, http.StatusBadRequest, pe.field, pe.msg)
			return
		}
		if p.app == "" {
			httpserve.Error(w, http.StatusBadRequest, "app", "Name the app: ?app=<app ID>.")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
		defer cancel()
		from, to := h.dayRange(p.days)
		rep, err := h.src.Report(ctx, p.app, from, to)
		if err != nil {
			h.log.Error("analytics data: read the report", "app", p.app, "days", p.days, "err", err)
			httpserve.RetryAfter(w, 5)
			httpserve.Error(w, http.StatusServiceUnavailable, "", unreadable)
			return
		}
		httpserve.WriteJSON(w, http.StatusOK, rep)
	})
}

// AppDataPath is where the api serves the report of a token's app, on
// the client address.
const AppDataPath = "/cms/analytics/report"

// AppData answers an authorized request for the report of t's app, as
// DataHandler does for an app named in the address: the route of an
// app's authors, whose token (events:read) names the app.
func (h *Handler) AppData(w http.ResponseWriter, r *http.Request, t auth.Target, _ func(context.Context) error) {
	q := r.URL.Query()
	q.Set("app", t.AppID)
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = q.Encode()
	h.DataHandler().ServeHTTP(w, r2)
}

// failed answers a request whose reads failed.
func (h *Handler) failed(w http.ResponseWriter, r *http.Request, err error, v *view) {
	if r.Context().Err() != nil {
		return // the client went away; nobody reads an answer
	}
	h.log.Error("analytics page: read the rollups", "app", v.App, "days", v.Days, "err", err)
	v.Problem = unreadable
	httpserve.RetryAfter(w, 5)
	h.writePage(w, http.StatusServiceUnavailable, *v)
}

// writePage renders v whole before writing, so that a failure to render
// is answered as such rather than as half a page.
func (h *Handler) writePage(w http.ResponseWriter, status int, v view) {
	var b bytes.Buffer
	if err := page.Execute(&b, v); err != nil {
		h.log.Error("analytics page: render", "err", fmt.Errorf("render the analytics page: %w", err))
		http.Error(w, "The analytics page could not be drawn.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// Self-contained: no script at all, styles inline, forms to itself.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// hasData reports whether a report counted anything at all.
func hasData(r analyticsreport.Report) bool {
	t := r.Totals
	return t.Conversations+t.Users+t.Turns+t.Errors+r.Sessions.Sessions > 0 || len(r.Intents) > 0 || len(r.Unanswered) > 0
}
