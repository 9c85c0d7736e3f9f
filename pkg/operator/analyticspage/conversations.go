package analyticspage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/edge/httpserve"
	"github.com/assistantcms/cms/pkg/pipeline/analyticsreport"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// Where the api serves an app's conversations to its authors, on the
// client address.
const (
	SessionsPath     = "/cms/analytics/sessions"
	ConversationPath = "/cms/analytics/conversation"
	SamplesPath      = "/cms/analytics/samples"
)

// Bounds of the conversation routes' parameters.
const (
	maxSessionID = 200
	maxWording   = 500
	maxOffset    = 10000
	defaultPage  = 50
)

// Conversations reads sessions and their turns; *ClickHouse satisfies it.
type Conversations interface {
	Sessions(ctx context.Context, q analyticsreport.SessionsQuery) ([]analyticsreport.SessionSummary, error)
	Conversation(ctx context.Context, app, session string, offset, limit int) ([]analyticsreport.Turn, error)
	Samples(ctx context.Context, app, wording string, day time.Time) ([]string, error)
}

// Sessions implements Conversations.
func (c *ClickHouse) Sessions(ctx context.Context, q analyticsreport.SessionsQuery) (out []analyticsreport.SessionSummary, err error) {
	err = c.conn.Do(ctx, func(s *chstore.Store) error {
		out, err = analyticsreport.Sessions(ctx, s, q)
		return err
	})
	return out, err
}

// Conversation implements Conversations.
func (c *ClickHouse) Conversation(ctx context.Context, app, session string, offset, limit int) (out []analyticsreport.Turn, err error) {
	err = c.conn.Do(ctx, func(s *chstore.Store) error {
		out, err = analyticsreport.Conversation(ctx, s, app, session, offset, limit)
		return err
	})
	return out, err
}

// Samples implements Conversations.
func (c *ClickHouse) Samples(ctx context.Context, app, wording string, day time.Time) (out []string, err error) {
	err = c.conn.Do(ctx, func(s *chstore.Store) error {
		out, err = analyticsreport.Samples(ctx, s, app, wording, day)
		return err
	})
	return out, err
}

// ConversationHandler answers an app's authors with its sessions and
// conversations.
type ConversationHandler struct {
	c   Conversations // nil: no ClickHouse
	log *slog.Logger
	now func() time.Time
}

// NewConversations serves the conversations of c; a nil c answers 503.
func NewConversations(c Conversations, log *slog.Logger) *ConversationHandler {
	return &ConversationHandler{c: c, log: log, now: time.Now}
}

// intParam reads a whole number from lo to hi, def when absent.
func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, &paramError{name, fmt.Sprintf("%s is %q: want a whole number from %d to %d.", name, s, lo, hi)}
	}
	return n, nil
}

// textParam reads a required text of at most max bytes of UTF-8.
func textParam(r *http.Request, name string, max int) (string, error) {
	s := r.URL.Query().Get(name)
	if s == "" || len(s) > max || !utf8.ValidString(s) {
		return "", &paramError{name, fmt.Sprintf("%s must be 1 to %d bytes of UTF-8.", name, max)}
	}
	return s, nil
}

// answer writes v, or why the read failed.
func (h *ConversationHandler) answer(w http.ResponseWriter, r *http.Request, what string, v any, err error) {
	w.Header().Set("Cache-Control", "no-store")
	var pe *paramError
	switch {
	case errors.As(err, &pe):
		httpserve.Error(w, http.StatusBadRequest, pe.field, pe.msg)
	case h.c == nil:
		httpserve.Error(w, http.StatusServiceUnavailable, "", "Conversations are read from ClickHouse, and this api has no ClickHouse: start it with CLICKHOUSE_ADDR (-clickhouse-addr).")
	case err == nil:
		httpserve.WriteJSON(w, http.StatusOK, v)
	case r.Context().Err() != nil:
	default:
		h.log.Error("analytics: read "+what, "err", err)
		httpserve.RetryAfter(w, 5)
		httpserve.Error(w, http.StatusServiceUnavailable, "", "The "+what+" could not be read from ClickHouse; retry shortly.")
	}
}

// Sessions answers the sessions of t's app: days (default 7), outcome
// (answered, fallback, error), after and afterSession (the page after the
// session that started then, an answer's next and nextSession) and limit
// (1 to 100, default 50).
func (h *ConversationHandler) Sessions(w http.ResponseWriter, r *http.Request, t auth.Target, _ func(context.Context) error) {
	var out struct {
		Sessions []analyticsreport.SessionSummary `json:"sessions"`
		// Next and NextSession name the next page; empty after the last.
		Next        string `json:"next"`
		NextSession string `json:"nextSession"`
	}
	err := func() error {
		days, err := intParam(r, "days", 7, 1, MaxDays)
		if err != nil {
			return err
		}
		q := analyticsreport.SessionsQuery{AppID: t.AppID, Outcome: r.URL.Query().Get("outcome"), AfterSession: r.URL.Query().Get("afterSession")}
		if q.Limit, err = intParam(r, "limit", defaultPage, 1, analyticsreport.MaxSessions); err != nil {
			return err
		}
		switch q.Outcome {
		case "", "answered", "fallback", "error":
		default:
			return &paramError{"outcome", fmt.Sprintf("outcome is %q: want answered, fallback or error.", q.Outcome)}
		}
		if s := r.URL.Query().Get("after"); s != "" {
			if q.AfterStart, err = time.Parse(time.RFC3339, s); err != nil {
				return &paramError{"after", fmt.Sprintf("after is %q: want an RFC 3339 time.", s)}
			}
		}
		if len(q.AfterSession) > maxSessionID {
			return &paramError{"afterSession", fmt.Sprintf("afterSession has more than %d bytes.", maxSessionID)}
		}
		if h.c == nil {
			return nil
		}
		y, m, d := h.now().UTC().Date()
		q.To = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		q.From = q.To.AddDate(0, 0, 1-days)
		ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
		defer cancel()
		if out.Sessions, err = h.c.Sessions(ctx, q); err != nil {
			return err
		}
		if n := len(out.Sessions); n == q.Limit {
			out.Next, out.NextSession = out.Sessions[n-1].Started.Truncate(time.Second).Format(time.RFC3339), out.Sessions[n-1].SessionID
		}
		if out.Sessions == nil {
			out.Sessions = []analyticsreport.SessionSummary{}
		}
		return nil
	}()
	h.answer(w, r, "sessions", out, err)
}

// Conversation answers one session of t's app turn by turn: session, and
// offset and limit (1 to 100, default 50) for its pages.
func (h *ConversationHandler) Conversation(w http.ResponseWriter, r *http.Request, t auth.Target, _ func(context.Context) error) {
	var out struct {
		SessionID string                 `json:"sessionId"`
		Offset    int                    `json:"offset"`
		Turns     []analyticsreport.Turn `json:"turns"`
		// More says a page follows, from offset + len(turns).
		More bool `json:"more"`
	}
	err := func() error {
		var err error
		if out.SessionID, err = textParam(r, "session", maxSessionID); err != nil {
			return err
		}
		if out.Offset, err = intParam(r, "offset", 0, 0, maxOffset); err != nil {
			return err
		}
		limit, err := intParam(r, "limit", defaultPage, 1, analyticsreport.MaxTurns)
		if err != nil || h.c == nil {
			return err
		}
		// One more than asked says whether a page follows.
		ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
		defer cancel()
		turns, err := h.c.Conversation(ctx, t.AppID, out.SessionID, out.Offset, limit+1)
		if err != nil {
			return err
		}
		if len(turns) > limit {
			turns, out.More = turns[:limit], true
		}
		out.Turns = append([]analyticsreport.Turn{}, turns...)
		return nil
	}()
	h.answer(w, r, "conversation", out, err)
}

// Samples answers the sessions of t's app that asked a wording on a day
// (2006-01-02, within the last MaxDays): a gap group's sample
// conversations.
func (h *ConversationHandler) Samples(w http.ResponseWriter, r *http.Request, t auth.Target, _ func(context.Context) error) {
	var out struct {
		Wording  string   `json:"wording"`
		Day      string   `json:"day"`
		Sessions []string `json:"sessions"`
	}
	err := func() error {
		var err error
		if out.Wording, err = textParam(r, "wording", maxWording); err != nil {
			return err
		}
		out.Day = r.URL.Query().Get("day")
		day, err := time.Parse(time.DateOnly, out.Day)
		if err != nil || day.After(h.now()) || day.Before(h.now().AddDate(0, 0, -MaxDays)) {
			return &paramError{"day", fmt.Sprintf("day is %q: want a day (2006-01-02) of the last %d.", out.Day, MaxDays)}
		}
		if h.c == nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
		defer cancel()
		if out.Sessions, err = h.c.Samples(ctx, t.AppID, out.Wording, day); err != nil {
			return err
		}
		out.Sessions = append([]string{}, out.Sessions...)
		return nil
	}()
	h.answer(w, r, "sample conversations", out, err)
}
