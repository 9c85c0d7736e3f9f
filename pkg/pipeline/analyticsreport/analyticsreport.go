// Package analyticsreport reads what the analytics rollups (app_daily,
// intent_daily, unanswered_daily, sessions) say about one app over a
// range of days: the figures the analytics page draws.
package analyticsreport

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// Report is what the rollups (app_daily, intent_daily, unanswered_daily,
// sessions) say about one app over a range of days. It reads a few rows
// per day whatever the traffic, so that a page can ask for it on every
// view.
type Report struct {
	AppID string `json:"appId"`
	// From and To are the first and last day, as 2006-01-02 (UTC).
	From string `json:"from"`
	To   string `json:"to"`
	// Days has every day of the range, in order; days without events
	// are zeros.
	Days   []DayFigures `json:"days"`
	Totals Totals       `json:"totals"`
	// Intents are the most matched intents, most first.
	Intents []IntentFigures `json:"intents"`
	// Unanswered are the fallback and low-confidence questions asked most
	// often; text that looks like personal data is never among them.
	Unanswered []UnansweredQuestion `json:"unanswered"`
	Sessions   SessionOutcomes      `json:"sessions"`
}

// DayFigures are one day's counts. A conversation is a session; turns
// are REQUEST_RESPONSE events; fallback and knowledge-base turns are
// among the turns, and may overlap; errors are ERROR events.
type DayFigures struct {
	Day                string `json:"day"`
	Conversations      uint64 `json:"conversations"`
	Users              uint64 `json:"users"`
	Turns              uint64 `json:"turns"`
	FallbackTurns      uint64 `json:"fallbackTurns"`
	KnowledgeBaseTurns uint64 `json:"knowledgeBaseTurns"`
	Errors             uint64 `json:"errors"`
}

// Totals are the counts over the whole range: conversations and users
// that were active on several days count once. Rates are of turns, and
// zero without turns.
type Totals struct {
	Conversations      uint64  `json:"conversations"`
	Users              uint64  `json:"users"`
	Turns              uint64  `json:"turns"`
	FallbackTurns      uint64  `json:"fallbackTurns"`
	KnowledgeBaseTurns uint64  `json:"knowledgeBaseTurns"`
	Errors             uint64  `json:"errors"`
	FallbackRate       float64 `json:"fallbackRate"`
	ErrorRate          float64 `json:"errorRate"`
	KnowledgeBaseShare float64 `json:"knowledgeBaseShare"`
	// MeanConfidence is over the turns that carried a match confidence;
	// nil when none did.
	MeanConfidence *float64 `json:"meanConfidence"`
}

// IntentFigures are one intent's matched turns, those matched with a
// confidence below chschema.LowConfidence, and the mean confidence (nil
// when no match carried one).
type IntentFigures struct {
	Intent         string   `json:"intent"`
	Matched        uint64   `json:"matched"`
	LowConfidence  uint64   `json:"lowConfidence"`
	MeanConfidence *float64 `json:"meanConfidence"`
}

// UnansweredQuestion is a normalised question that fell back or matched
// with a low confidence: how often, and by how many distinct users.
type UnansweredQuestion struct {
	Query string `json:"query"`
	Times uint64 `json:"times"`
	Users uint64 `json:"users"`
}

// Outcome counts sessions by how their last turn or error went.
type Outcome struct {
	Sessions uint64 `json:"sessions"`
	Answered uint64 `json:"answered"`
	Fallback uint64 `json:"fallback"`
	Error    uint64 `json:"error"`
	// WithoutTurn ended with neither a turn nor an error (a launch
	// alone, say).
	WithoutTurn uint64 `json:"withoutTurn"`
}

// Ending is the sessions whose last event was in one handler ("" when
// no event named one).
type Ending struct {
	Handler string `json:"handler"`
	Outcome
}

// SessionOutcomes are the range's sessions by outcome, and the handlers
// where most of them ended, most first.
type SessionOutcomes struct {
	Outcome
	Endings []Ending `json:"endings"`
}

// How many rows of each list a report keeps.
const (
	MaxIntents    = 20
	MaxUnanswered = 50
	MaxEndings    = 10
)

// dayLayout is how days are written in reports and bound to queries.
const dayLayout = "2006-01-02"

// Read reads the rollups of appID for the days from..to (UTC dates, both
// included).
func Read(ctx context.Context, s *chstore.Store, appID string, from, to time.Time) (Report, error) {
	from, to = utcDay(from), utcDay(to)
	if to.Before(from) {
		return Report{}, fmt.Errorf("report of %s: the range ends (%s) before it starts (%s)", appID, to.Format(dayLayout), from.Format(dayLayout))
	}
	ctx = s.Context(ctx)
	r := Report{AppID: appID, From: from.Format(dayLayout), To: to.Format(dayLayout)}
	steps := []struct {
		what string
		read func(context.Context, *chstore.Store, *Report) error
	}{
		{"days", readDays},
		{"totals", readTotals},
		{"intents", readIntents},
		{"unanswered questions", readUnanswered},
		{"session outcomes", readSessions},
	}
	for _, st := range steps {
		if err := st.read(ctx, s, &r); err != nil {
			return Report{}, fmt.Errorf("report of %s, %s to %s: read %s: %w", appID, r.From, r.To, st.what, err)
		}
	}
	return r, nil
}

// Apps lists the apps with rollup rows for the days from..to, in order,
// at most limit of them.
func Apps(ctx context.Context, s *chstore.Store, from, to time.Time, limit int) ([]string, error) {
	from, to = utcDay(from), utcDay(to)
	rows, err := s.Conn().Query(s.Context(ctx), "SELECT app_id FROM "+s.Table("app_daily")+
		" WHERE day >= toDate(?) AND day <= toDate(?) GROUP BY app_id ORDER BY app_id LIMIT ?",
		from.Format(dayLayout), to.Format(dayLayout), limit)
	if err != nil {
		return nil, fmt.Errorf("read the apps with analytics: %w", err)
	}
	defer rows.Close()
	var apps []string
	for rows.Next() {
		var app string
		if err := rows.Scan(&app); err != nil {
			return nil, fmt.Errorf("read the apps with analytics: %w", err)
		}
		apps = append(apps, app)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the apps with analytics: %w", err)
	}
	return apps, nil
}

// utcDay is the start of t's day in UTC, the days the rollups count in.
func utcDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// rangeWhere selects the rows of one app and range; its parameters are
// those of rangeArgs. The app ID and days are bound, never spliced in.
const rangeWhere = " WHERE app_id = ? AND day >= toDate(?) AND day <= toDate(?)"

func rangeArgs(r *Report) []any { return []any{r.AppID, r.From, r.To} }

func readDays(ctx context.Context, s *chstore.Store, r *Report) error {
	rows, err := s.Conn().Query(ctx, "SELECT day, uniqIfMerge(conversations), uniqIfMerge(users), uniqIfMerge(turns), "+
		"uniqIfMerge(fallback_turns), uniqIfMerge(knowledge_base_turns), uniqIfMerge(errors) FROM "+s.Table("app_daily")+
		rangeWhere+" GROUP BY day ORDER BY day", rangeArgs(r)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	byDay := map[string]DayFigures{}
	for rows.Next() {
		var day time.Time
		var f DayFigures
		if err := rows.Scan(&day, &f.Conversations, &f.Users, &f.Turns, &f.FallbackTurns, &f.KnowledgeBaseTurns, &f.Errors); err != nil {
			return err
		}
		f.Day = day.Format(dayLayout)
		byDay[f.Day] = f
	}
	if err := rows.Err(); err != nil {
		return err
	}
	from, _ := time.Parse(dayLayout, r.From)
	to, _ := time.Parse(dayLayout, r.To)
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		f, ok := byDay[d.Format(dayLayout)]
		if !ok {
			f.Day = d.Format(dayLayout)
		}
		r.Days = append(r.Days, f)
	}
	return nil
}

func readTotals(ctx context.Context, s *chstore.Store, r *Report) error {
	// Grouped by the app, so that a range without rows has no row rather
	// than one of empty states.
	rows, err := s.Conn().Query(ctx, "SELECT uniqIfMerge(conversations), uniqIfMerge(users), uniqIfMerge(turns), "+
		"uniqIfMerge(fallback_turns), uniqIfMerge(knowledge_base_turns), uniqIfMerge(errors), avgIfMerge(confidence) FROM "+
		s.Table("app_daily")+rangeWhere+" GROUP BY app_id", rangeArgs(r)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	t := &r.Totals
	for rows.Next() {
		var confidence float64
		if err := rows.Scan(&t.Conversations, &t.Users, &t.Turns, &t.FallbackTurns, &t.KnowledgeBaseTurns, &t.Errors, &confidence); err != nil {
			return err
		}
		t.MeanConfidence = meanOrNil(confidence)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if t.Turns > 0 {
		n := float64(t.Turns)
		t.FallbackRate, t.ErrorRate, t.KnowledgeBaseShare = float64(t.FallbackTurns)/n, float64(t.Errors)/n, float64(t.KnowledgeBaseTurns)/n
	}
	return nil
}

// meanOrNil is a mean as a pointer: nil for the NaN of a mean over
// nothing, which JSON cannot carry.
func meanOrNil(mean float64) *float64 {
	if math.IsNaN(mean) || math.IsInf(mean, 0) {
		return nil
	}
	return &mean
}

func readIntents(ctx context.Context, s *chstore.Store, r *Report) error {
	rows, err := s.Conn().Query(ctx, "SELECT intent_id, uniqMerge(turns) AS matched, uniqIfMerge(low_confidence_turns), "+
		"avgIfMerge(confidence) FROM "+s.Table("intent_daily")+rangeWhere+
		" GROUP BY intent_id ORDER BY matched DESC, intent_id LIMIT ?", append(rangeArgs(r), MaxIntents)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var f IntentFigures
		var confidence float64
		if err := rows.Scan(&f.Intent, &f.Matched, &f.LowConfidence, &confidence); err != nil {
			return err
		}
		f.MeanConfidence = meanOrNil(confidence)
		r.Intents = append(r.Intents, f)
	}
	return rows.Err()
}

func readUnanswered(ctx context.Context, s *chstore.Store, r *Report) error {
	rows, err := s.Conn().Query(ctx, "SELECT query, uniqMerge(asked) AS times, uniqIfMerge(users) FROM "+
		s.Table("unanswered_daily")+rangeWhere+" GROUP BY query ORDER BY times DESC, query LIMIT ?",
		append(rangeArgs(r), MaxUnanswered)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var q UnansweredQuestion
		if err := rows.Scan(&q.Query, &q.Times, &q.Users); err != nil {
			return err
		}
		// The view keeps such text out; rows may have come another way,
		// and a page must never show it.
		if !chschema.IsPrivate(q.Query) {
			r.Unanswered = append(r.Unanswered, q)
		}
	}
	return rows.Err()
}

func readSessions(ctx context.Context, s *chstore.Store, r *Report) error {
	// A session's rows (one per day it was active) merge into one before
	// its last handler and outcome are read.
	rows, err := s.Conn().Query(ctx, "SELECT left_at, ended_with, count() FROM (SELECT session_id, "+
		"argMaxIfMerge(last_handler) AS left_at, argMaxIfMerge(outcome) AS ended_with FROM "+s.Table("sessions")+
		rangeWhere+" GROUP BY session_id) GROUP BY left_at, ended_with", rangeArgs(r)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	byHandler := map[string]*Ending{}
	for rows.Next() {
		var handler, outcome string
		var n uint64
		if err := rows.Scan(&handler, &outcome, &n); err != nil {
			return err
		}
		e := byHandler[handler]
		if e == nil {
			e = &Ending{Handler: handler}
			byHandler[handler] = e
		}
		e.add(outcome, n)
		r.Sessions.add(outcome, n)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, e := range byHandler {
		r.Sessions.Endings = append(r.Sessions.Endings, *e)
	}
	slices.SortFunc(r.Sessions.Endings, func(a, b Ending) int {
		return cmp.Or(cmp.Compare(b.Sessions, a.Sessions), cmp.Compare(a.Handler, b.Handler))
	})
	if len(r.Sessions.Endings) > MaxEndings {
		r.Sessions.Endings = r.Sessions.Endings[:MaxEndings]
	}
	return nil
}

// add counts n sessions that ended with outcome, as the sessions view
// writes it.
func (o *Outcome) add(outcome string, n uint64) {
	o.Sessions += n
	switch outcome {
	case "answered":
		o.Answered += n
	case "fallback":
		o.Fallback += n
	case "error":
		o.Error += n
	default:
		o.WithoutTurn += n
	}
}
