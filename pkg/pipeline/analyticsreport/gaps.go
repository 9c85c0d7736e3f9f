package analyticsreport

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// GapWording is one normalised question an app's assistant could not
// answer over a range of days, as gap_daily counts it.
type GapWording struct {
	Query string `json:"query"`
	// Asked counts the turns, Users the distinct users who asked.
	Asked uint64 `json:"asked"`
	Users uint64 `json:"users"`
	// FirstSeen and LastSeen are the first and last such turn in the
	// range, to the second (UTC).
	FirstSeen time.Time `json:"firstSeen"`
	LastSeen  time.Time `json:"lastSeen"`
	// ThisWeek counts the turns of the range's last 7 days, LastWeek
	// those of the 7 before, whatever the range.
	ThisWeek uint64 `json:"thisWeek"`
	LastWeek uint64 `json:"lastWeek"`
	// Reason is why most of its turns were gaps: "fallback" (not
	// understood), "knowledge_base" (the knowledge base found nothing) or
	// "low_confidence" (matched below the threshold).
	Reason string `json:"reason"`
}

// GapQuery chooses what Gaps reads.
type GapQuery struct {
	AppID    string
	From, To time.Time
	// LowConfidence is the threshold below which a matched turn is a
	// gap: a multiple of chschema.GapBand from GapBand to
	// chschema.MaxGapThreshold.
	LowConfidence float64
	// Limit is how many wordings to read, those asked by most users
	// first.
	Limit int
}

// CheckLowConfidence refuses a threshold gap_daily cannot apply.
func CheckLowConfidence(t float64) error {
	bands := t / chschema.GapBand
	if math.IsNaN(t) || t < chschema.GapBand || t > chschema.MaxGapThreshold+1e-9 || math.Abs(bands-math.Round(bands)) > 1e-9 {
		return fmt.Errorf("low-confidence threshold %v: want a multiple of %v from %v to %v", t, chschema.GapBand, chschema.GapBand, chschema.MaxGapThreshold)
	}
	return nil
}

// Gaps reads the wordings of q's app that went unanswered in its range:
// fallback turns, knowledge-base turns that found nothing and turns
// matched below q.LowConfidence, those asked by most users first, at most
// q.Limit. It reads gap_daily, a few rows per wording and day, never the
// events. Text that looks like personal data is never among them.
func Gaps(ctx context.Context, s *chstore.Store, q GapQuery) ([]GapWording, error) {
	sql, args, err := gapsSQL(s.Table, q)
	if err != nil {
		return nil, err
	}
	rows, err := s.Conn().Query(s.Context(ctx), sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read the gaps of %s: %w", q.AppID, err)
	}
	defer rows.Close()
	var out []GapWording
	for rows.Next() {
		var w GapWording
		var fallback, knowledgeBase, lowConfidence uint64
		if err := rows.Scan(&w.Query, &w.Asked, &w.Users, &w.FirstSeen, &w.LastSeen, &w.ThisWeek, &w.LastWeek, &fallback, &knowledgeBase, &lowConfidence); err != nil {
			return nil, fmt.Errorf("read the gaps of %s: %w", q.AppID, err)
		}
		w.Reason = "fallback"
		if knowledgeBase > fallback {
			w.Reason = "knowledge_base"
		}
		if lowConfidence > max(fallback, knowledgeBase) {
			w.Reason = "low_confidence"
		}
		// The view keeps such text out; rows may have come another way.
		if !chschema.IsPrivate(w.Query) {
			w.FirstSeen, w.LastSeen = w.FirstSeen.UTC(), w.LastSeen.UTC()
			out = append(out, w)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the gaps of %s: %w", q.AppID, err)
	}
	return out, nil
}

// gapsSQL is Gaps' statement, with table naming the database's tables.
func gapsSQL(table func(string) string, q GapQuery) (string, []any, error) {
	if err := CheckLowConfidence(q.LowConfidence); err != nil {
		return "", nil, err
	}
	if q.Limit < 1 {
		return "", nil, fmt.Errorf("gaps of %s: limit %d: want 1 or more", q.AppID, q.Limit)
	}
	from, to := utcDay(q.From), utcDay(q.To)
	if to.Before(from) {
		return "", nil, fmt.Errorf("gaps of %s: the range ends (%s) before it starts (%s)", q.AppID, to.Format(dayLayout), from.Format(dayLayout))
	}
	band := int(math.Round(q.LowConfidence / chschema.GapBand))
	// One pass over the rows: the turns of each week and reason are
	// merged from the same states, under conditions. A range shorter than
	// the two weeks compared reads those too, and counts only its own
	// days in everything else.
	weeksFrom := to.AddDate(0, 0, -13)
	readFrom, inRange, reasonIn := from, func(f, col string) string { return f + "(" + col + ")" }, ""
	if weeksFrom.Before(from) {
		readFrom = weeksFrom
		cond := "day >= toDate('" + from.Format(dayLayout) + "')"
		inRange = func(f, col string) string { return f + "If(" + col + ", " + cond + ")" }
		reasonIn = " AND " + cond
	}
	reason := func(r string) string { return "uniqMergeIf(asked, reason = '" + r + "'" + reasonIn + ")" }
	sql := "SELECT query, " + inRange("uniqMerge", "asked") + " AS times, " + inRange("uniqIfMerge", "users") + " AS people, " +
		inRange("minMerge", "first_seen") + ", " + inRange("maxMerge", "last_seen") + ", " +
		"uniqMergeIf(asked, day > toDate(?) - 7), uniqMergeIf(asked, day > toDate(?) - 14 AND day <= toDate(?) - 7), " +
		reason("fallback") + ", " + reason("knowledge_base") + ", " + reason("low_confidence") + " FROM " +
		table("gap_daily") + " WHERE app_id = ? AND day >= toDate(?) AND day <= toDate(?) AND (reason != 'low_confidence' OR band < ?) AND length(query) <= ? " +
		"GROUP BY query HAVING times > 0 ORDER BY people DESC, times DESC, query LIMIT ?"
	day := to.Format(dayLayout)
	return sql, []any{day, day, day, q.AppID, readFrom.Format(dayLayout), day, band, chschema.MaxGapQueryBytes, q.Limit}, nil
}
