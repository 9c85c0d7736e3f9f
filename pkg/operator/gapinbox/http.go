package gapinbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/pipeline/analyticsreport"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// Path is where the api serves an app's inbox, as JSON.
const Path = "/cms/analytics/gaps"

// Days an inbox covers: DefaultDays without a days parameter, at most
// MaxDays.
const (
	DefaultDays = 30
	MaxDays     = 366
)

// buildTimeout bounds one request's wait for its inbox, the turn of
// another build included.
const buildTimeout = 20 * time.Second

// Handler answers Path for the app of a token.
type Handler struct {
	b   *Builder // nil: no ClickHouse
	log *slog.Logger
}

// NewHandler serves the inboxes of b; a nil b (no ClickHouse configured)
// answers 503, saying what is missing.
func NewHandler(b *Builder, log *slog.Logger) *Handler { return &Handler{b: b, log: log} }

// Serve answers an authorized request for the inbox of t's app: days (1
// to MaxDays, default DefaultDays), lowConfidence (default: the app's
// setting) and state (default open) choose it.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, t auth.Target, _ func(context.Context) error) {
	w.Header().Set("Cache-Control", "no-store")
	q := r.URL.Query()
	days := DefaultDays
	if s := q.Get("days"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxDays {
			httpserve.Error(w, http.StatusBadRequest, "days", fmt.Sprintf("days is %q: want a whole number from 1 to %d.", s, MaxDays))
			return
		}
		days = n
	}
	req := Request{App: t.AppID, Days: days, State: q.Get("state")}
	switch req.State {
	case "", StateOpen, StateResolved, StateDismissed, StateAll:
	default:
		httpserve.Error(w, http.StatusBadRequest, "state", fmt.Sprintf("state is %q: want open, resolved, dismissed or all.", req.State))
		return
	}
	if s := q.Get("lowConfidence"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err == nil {
			err = analyticsreport.CheckLowConfidence(v)
		}
		if err != nil {
			httpserve.Error(w, http.StatusBadRequest, "lowConfidence", fmt.Sprintf("lowConfidence is %q: want a multiple of %v from %v to %v.",
				s, chschema.GapBand, chschema.GapBand, chschema.MaxGapThreshold))
			return
		}
		req.LowConfidence = &v
	}
	if h.b == nil {
		httpserve.Error(w, http.StatusServiceUnavailable, "", "The gap inbox reads the ClickHouse rollups, and this api has no ClickHouse: start it with CLICKHOUSE_ADDR (-clickhouse-addr).")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), buildTimeout)
	defer cancel()
	in, err := h.b.Answer(ctx, req)
	var many *TooManyBuilds
	switch {
	case err == nil:
		httpserve.WriteJSON(w, http.StatusOK, in)
	case r.Context().Err() != nil:
		// The client went away; nobody reads an answer.
	case errors.As(err, &many):
		httpserve.RetryAfter(w, max(1, many.RetryAfter.Seconds()))
		httpserve.Error(w, http.StatusTooManyRequests, "", "This app's gap inboxes were built too often: retry later, or ask again for one built in the last minute.")
	case errors.Is(err, ErrBusy), errors.Is(err, context.DeadlineExceeded):
		httpserve.RetryAfter(w, 5)
		httpserve.Error(w, http.StatusServiceUnavailable, "", "The gap inbox is being built; retry shortly.")
	default:
		h.log.Error("gap inbox: build", "app", t.AppID, "days", days, "err", err)
		httpserve.RetryAfter(w, 5)
		httpserve.Error(w, http.StatusServiceUnavailable, "", "The gap inbox could not be read from ClickHouse; retry shortly.")
	}
}
