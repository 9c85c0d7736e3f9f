package analyticsreport

import (
	"context"
	"fmt"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// SessionSummary is one session of an app, as the sessions rollup has it.
type SessionSummary struct {
	SessionID string    `json:"sessionId"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended"`
	Turns     uint64    `json:"turns"`
	// Outcome is how its last turn or error went: answered, fallback,
	// error, or "" (none).
	Outcome string `json:"outcome"`
	// LeftAt is the handler of its last event.
	LeftAt string `json:"leftAt"`
}

// MaxSessions is how many sessions one read lists, MaxTurns how many
// turns of a conversation.
const (
	MaxSessions = 100
	MaxTurns    = 100
)

// SessionsQuery chooses the sessions Sessions lists.
type SessionsQuery struct {
	AppID    string
	From, To time.Time
	// Outcome, when not empty, keeps the sessions that ended so.
	Outcome string
	// After names the page: the sessions listed after the one that
	// started at AfterStart (to the second) with ID AfterSession; zero
	// for the first page.
	AfterStart   time.Time
	AfterSession string
	// Limit is how many, up to MaxSessions.
	Limit int
}

// Sessions lists the sessions of an app active from..to, those that
// started last first (sessions that started in one second by ID).
func Sessions(ctx context.Context, s *chstore.Store, q SessionsQuery) ([]SessionSummary, error) {
	sql, args := sessionsSQL(s.Table, q)
	rows, err := s.Conn().Query(s.Context(ctx), sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read the sessions of %s: %w", q.AppID, err)
	}
	defer rows.Close()
	var out []SessionSummary
	for rows.Next() {
		var ss SessionSummary
		if err := rows.Scan(&ss.SessionID, &ss.Started, &ss.Ended, &ss.Turns, &ss.Outcome, &ss.LeftAt); err != nil {
			return nil, fmt.Errorf("read the sessions of %s: %w", q.AppID, err)
		}
		ss.Started, ss.Ended = ss.Started.UTC(), ss.Ended.UTC()
		out = append(out, ss)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the sessions of %s: %w", q.AppID, err)
	}
	return out, nil
}

// Turn is one turn of a conversation: what the user said and what the
// assistant answered.
type Turn struct {
	At      time.Time `json:"at"`
	Query   string    `json:"query"`
	Answer  string    `json:"answer"`
	Handler string    `json:"handler"`
	Intent  string    `json:"intent"`
	// Confidence is the match confidence, nil when the turn had none.
	Confidence *float32 `json:"confidence"`
	// Request is the request's type (INTENT_REQUEST, INPUT_UNKNOWN_REQUEST, ...).
	Request string `json:"request"`
}

// Conversation reads the turns of one session of an app, in order, from
// the turn at offset on, at most limit (up to MaxTurns). It reads the
// days the sessions rollup says the session was active, so that only
// those days of the app are read; a session the rollup does not know (or
// whose user was forgotten) has no turns.
func Conversation(ctx context.Context, s *chstore.Store, app, session string, offset, limit int) ([]Turn, error) {
	limit = min(max(limit, 1), MaxTurns)
	ctx = s.Context(ctx)
	var first, last time.Time
	var n uint64
	sql, args := sessionDaysSQL(s.Table, app, session)
	if err := s.Conn().QueryRow(ctx, sql, args...).Scan(&n, &first, &last); err != nil {
		return nil, fmt.Errorf("read the days of session %s of %s: %w", session, app, err)
	}
	if n == 0 {
		return nil, nil
	}
	sql, args = turnsSQL(s.Table, app, session, first, last, offset, limit)
	rows, err := s.Conn().Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read session %s of %s: %w", session, app, err)
	}
	defer rows.Close()
	var out []Turn
	for rows.Next() {
		var tn Turn
		if err := rows.Scan(&tn.At, &tn.Query, &tn.Answer, &tn.Handler, &tn.Intent, &tn.Confidence, &tn.Request); err != nil {
			return nil, fmt.Errorf("read session %s of %s: %w", session, app, err)
		}
		tn.At = tn.At.UTC()
		out = append(out, tn)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read session %s of %s: %w", session, app, err)
	}
	return out, nil
}

// MaxSamples is how many sessions Samples names.
const MaxSamples = 5

// Samples names up to MaxSamples sessions of an app that asked wording
// (normalised, as gap_daily keeps it) on day, the latest first: the
// conversations a gap group links to.
func Samples(ctx context.Context, s *chstore.Store, app, wording string, day time.Time) ([]string, error) {
	sql, args := samplesSQL(s.Table, app, wording, day)
	rows, err := s.Conn().Query(s.Context(ctx), sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read the sessions that asked a gap of %s: %w", app, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			return nil, fmt.Errorf("read the sessions that asked a gap of %s: %w", app, err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the sessions that asked a gap of %s: %w", app, err)
	}
	return out, nil
}

// sessionsSQL is Sessions' statement, with table naming the database's
// tables.
func sessionsSQL(table func(string) string, q SessionsQuery) (string, []any) {
	limit := min(max(q.Limit, 1), MaxSessions)
	from, to := utcDay(q.From), utcDay(q.To)
	page, args := "", []any{q.AppID, from.Format(dayLayout), to.Format(dayLayout)}
	if !q.AfterStart.IsZero() {
		// Sessions that started after the page's last are on earlier
		// pages; the days after its start need not be read.
		page = " AND (sec < ? OR (sec = ? AND session_id > ?))"
		if d := utcDay(q.AfterStart); d.Before(to) {
			args[2] = d.Format(dayLayout)
		}
	}
	args = append(args, q.Outcome, q.Outcome)
	if page != "" {
		sec := q.AfterStart.UTC().Unix()
		args = append(args, sec, sec, q.AfterSession)
	}
	args = append(args, limit)
	return "SELECT session_id, started, ended, turn_count, ended_with, left_at FROM (SELECT session_id, " +
		"minMerge(first_event) AS started, maxMerge(last_event) AS ended, uniqIfMerge(turns) AS turn_count, " +
		"argMaxIfMerge(outcome) AS ended_with, argMaxIfMerge(last_handler) AS left_at, toUInt32(toDateTime(started)) AS sec FROM " + table("sessions") +
		" WHERE app_id = ? AND day >= toDate(?) AND day <= toDate(?) GROUP BY session_id) " +
		"WHERE (? = '' OR ended_with = ?)" + page + " ORDER BY sec DESC, session_id LIMIT ?", args
}

// sessionDaysSQL counts a session's rows in the sessions rollup and reads
// its first and last day.
func sessionDaysSQL(table func(string) string, app, session string) (string, []any) {
	return "SELECT count(), min(day), max(day) FROM " + table("sessions") + " WHERE app_id = ? AND session_id = ?", []any{app, session}
}

// turnsSQL reads a session's turns, of its days first..last.
func turnsSQL(table func(string) string, app, session string, first, last time.Time, offset, limit int) (string, []any) {
	return "SELECT event_time, raw_query, output_display_text, selected_handler, intent_id, match_confidence, request_type FROM " +
			table("events") + " WHERE app_id = ? AND session_id = ? AND toDate(event_time) >= toDate(?) AND toDate(event_time) <= toDate(?) " +
			"AND name = 'REQUEST_RESPONSE' ORDER BY event_time, event_id LIMIT 1 BY event_id LIMIT ?, ?",
		[]any{app, session, first.Format(dayLayout), last.Format(dayLayout), offset, limit}
}

// samplesSQL is Samples' statement.
func samplesSQL(table func(string) string, app, wording string, day time.Time) (string, []any) {
	return "SELECT session_id, max(event_time) AS at FROM " + table("events") +
			" WHERE app_id = ? AND toDate(event_time) = toDate(?) AND name = 'REQUEST_RESPONSE' AND query_normalized = ? AND session_id != '' " +
			"GROUP BY session_id ORDER BY at DESC, session_id LIMIT ?",
		[]any{app, utcDay(day).Format(dayLayout), wording, MaxSamples}
}
