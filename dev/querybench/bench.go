package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// form is one way of asking a question.
type form struct {
	query, name string
	// key names the form in query IDs.
	key string
	sql string
	// first is the index of its query's first form, which the others are
	// compared with.
	first int
	// compare says whether its answer must equal the first form's.
	compare bool
	// tolerance is how far, relatively, a number in its answer may be
	// from the first form's: the rollups count with uniq, exact up to
	// about 65,000 values per row but for collisions of its 32-bit
	// hashes, and within about 1% beyond, which at 10M events was seen
	// to reach 1.0%; twice that leaves room for a run's chance.
	tolerance float64
}

// result is what a form measured.
type result struct {
	form
	answer [][]string
	times  []time.Duration
	// readRows and readBytes are per run, from the query log.
	readRows, readBytes []uint64
	// maxDiff is the largest relative difference of a number in its
	// answer from the first form's, and where it was.
	maxDiff   float64
	maxDiffAt string
	// agrees says the answer matched the first form's.
	agrees bool
}

func (r *result) median() time.Duration {
	t := slices.Clone(r.times)
	slices.Sort(t)
	if n := len(t); n%2 == 0 {
		return (t[n/2-1] + t[n/2]) / 2
	}
	return t[len(t)/2]
}

func (r *result) rows() uint64 { return medianOf(r.readRows) }

func (r *result) bytes() uint64 { return medianOf(r.readBytes) }

func medianOf(v []uint64) uint64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// report is the benchmark's outcome.
type report struct {
	version     string
	fill        fillResult
	parts, rows uint64
	// rollupRows and rollupParts are app_daily's, before merges of its
	// states have caught up.
	rollupRows, rollupParts uint64
	// stateBytes is the uncompressed size of app_daily's
	// conversations, users and turns states on disk: the query log
	// counts little of an aggregate state in its bytes read.
	stateBytes    [3]uint64
	days, runs    int
	session       string
	first, last   time.Time
	results       []*result
	disagreements []string
	// load is the one-minute load average before and after measuring.
	load [2]string
}

// uniqTolerance is the relative tolerance of uniq's counts; see
// form.tolerance.
const uniqTolerance = 0.02

// quote is an SQL string literal.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// pickSession picks one of benchApp's sessions whose events were written
// twice, active nearest the middle of the window, so that the unbounded
// form has days on both sides of it to read and both forms have copies to
// drop.
func pickSession(ctx context.Context, s *chstore.Store, db string, o options) (string, error) {
	var id string
	err := s.Conn().QueryRow(ctx, fmt.Sprintf(`SELECT session_id FROM %s.events
WHERE app_id = %s AND kafka_offset < %d
ORDER BY abs(toInt64(toRelativeDayNum(event_time)) - toInt64(toRelativeDayNum(now())) + %d), session_id
LIMIT 1`, db, quote(benchApp), o.redelivered(), o.days/2)).Scan(&id)
	if err != nil {
		return "", fmt.Errorf("pick a session: %w", err)
	}
	return id, nil
}

// boundsSQL is how an analyst finds the days a session was active.
func boundsSQL(db, session string) string {
	return fmt.Sprintf(`SELECT toDate(minMerge(first_event)) AS first_day, toDate(maxMerge(last_event)) AS last_day
FROM %s.sessions
WHERE app_id = %s AND session_id = %s`, db, quote(benchApp), quote(session))
}

// forms are the measured queries: the documented forms of
// docs/analytics.md against what they replace.
func forms(db, session string, first, last time.Time) []form {
	app := quote(benchApp)
	return []form{
		{query: "Conversations per day, 30 days", name: "raw `events`, `uniqExact(session_id)`", key: "conversations-raw", first: 0, sql: fmt.Sprintf(`SELECT toDate(event_time) AS day, uniqExact(session_id) AS conversation_count
FROM %s.events
WHERE app_id = %s AND event_time >= today() - 30 AND session_id != ''
GROUP BY day
ORDER BY day`, db, app)},
		{query: "Conversations per day, 30 days", name: "rollup `app_daily`, `uniqIfMerge(conversations)`", key: "conversations-rollup", first: 0, compare: true, tolerance: uniqTolerance, sql: fmt.Sprintf(`SELECT day, uniqIfMerge(conversations) AS conversation_count
FROM %s.app_daily
WHERE app_id = %s AND day >= today() - 30
GROUP BY day
ORDER BY day`, db, app)},
		{query: "Conversations, users and turns per day, 30 days", name: "raw `events`, `uniqExact`", key: "daily-raw", first: 2, sql: fmt.Sprintf(`SELECT toDate(event_time) AS day, uniqExact(session_id) AS conversation_count,
       uniqExactIf(user_id, user_id != '') AS user_count, uniqExactIf(event_id, name = 'REQUEST_RESPONSE') AS turn_count
FROM %s.events
WHERE app_id = %s AND event_time >= today() - 30 AND session_id != ''
GROUP BY day
ORDER BY day`, db, app)},
		{query: "Conversations, users and turns per day, 30 days", name: "rollup `app_daily` (the documented query)", key: "daily-rollup", first: 2, compare: true, tolerance: uniqTolerance, sql: fmt.Sprintf(`SELECT day, uniqIfMerge(conversations) AS conversation_count, uniqIfMerge(users) AS user_count,
       uniqIfMerge(turns) AS turn_count
FROM %s.app_daily
WHERE app_id = %s AND day >= today() - 30
GROUP BY day
ORDER BY day`, db, app)},
		{query: "A session's transcript", name: "unbounded, `FINAL`", key: "transcript-final", first: 4, sql: fmt.Sprintf(`SELECT event_time, name, raw_query, output_display_text, selected_handler
FROM %s.events FINAL
WHERE app_id = %s AND session_id = %s
ORDER BY event_time, event_id`, db, app, quote(session))},
		{query: "A session's transcript", name: "its days from `sessions`", key: "transcript-bounds", first: 4, sql: boundsSQL(db, session)},
		{query: "A session's transcript", name: "bounded by its days, `LIMIT 1 BY event_id`", key: "transcript-bounded", first: 4, compare: true, sql: fmt.Sprintf(`SELECT event_time, name, raw_query, output_display_text, selected_handler
FROM %s.events
WHERE app_id = %s AND session_id = %s
  AND toDate(event_time) BETWEEN toDate('%s') AND toDate('%s')
ORDER BY event_time, event_id
LIMIT 1 BY event_id`, db, app, quote(session), first.Format(time.DateOnly), last.Format(time.DateOnly))},
	}
}

// measure runs every form o.runs times, one form after another within a
// run so that the machine's drift spreads over all of them, then reads
// what each read from the query log.
func measure(ctx context.Context, s *chstore.Store, db string, o options, rep *report) error {
	if err := s.Conn().QueryRow(ctx, boundsSQL(db, rep.session)).Scan(&rep.first, &rep.last); err != nil {
		return fmt.Errorf("read the session's days: %w", err)
	}
	for _, f := range forms(db, rep.session, rep.first, rep.last) {
		rep.results = append(rep.results, &result{form: f})
	}
	// Query IDs unique to this process, so that a reused server's log
	// cannot be mistaken for this run's.
	prefix := "querybench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	settings := clickhouse.Settings{"log_queries": 1}
	if s.Features().LowCardinalitySetting {
		settings["allow_experimental_low_cardinality_type"] = 1
	}
	for run := range o.runs {
		for _, r := range rep.results {
			qctx := clickhouse.Context(ctx, clickhouse.WithSettings(settings),
				clickhouse.WithQueryID(fmt.Sprintf("%s-%s-%d", prefix, r.key, run)))
			start := time.Now()
			answer, err := queryAll(qctx, s, r.sql)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", r.query, r.name, err)
			}
			r.times = append(r.times, time.Since(start))
			if run == 0 {
				r.answer = answer
			} else if !reflect.DeepEqual(answer, r.answer) {
				rep.disagreements = append(rep.disagreements, fmt.Sprintf("%s, %s: run %d answered differently from run 1", r.query, r.name, run+1))
			}
		}
		o.progress("run done", "run", run+1)
	}
	rep.compareAnswers()
	return readLog(ctx, s, prefix, o.runs, rep.results)
}

// compareAnswers records every form whose answer is empty or differs from
// its query's first form's.
func (rep *report) compareAnswers() {
	for _, r := range rep.results {
		if !r.compare {
			continue
		}
		want := rep.results[r.first]
		if len(r.answer) == 0 {
			rep.disagreements = append(rep.disagreements, fmt.Sprintf("%s: %s answered nothing", r.query, r.name))
		} else if diff := r.differences(want.answer); diff != "" {
			rep.disagreements = append(rep.disagreements, fmt.Sprintf("%s: %s answered %d rows, %s %d rows, first difference: %s",
				r.query, r.name, len(r.answer), want.name, len(want.answer), diff))
		} else {
			r.agrees = true
		}
	}
}

// differences compares the answer with want's, cell by cell, numbers
// within the form's tolerance; it records the largest relative difference
// and returns the first difference beyond the tolerance, or "".
func (r *result) differences(want [][]string) string {
	if len(r.answer) != len(want) {
		return firstDifference(r.answer, want)
	}
	for i, row := range r.answer {
		if len(row) != len(want[i]) {
			return firstDifference(r.answer, want)
		}
		for j, got := range row {
			if got == want[i][j] {
				continue
			}
			g, err1 := strconv.ParseFloat(got, 64)
			w, err2 := strconv.ParseFloat(want[i][j], 64)
			if err1 != nil || err2 != nil || r.tolerance == 0 {
				return fmt.Sprintf("row %d: %v against %v", i+1, row, want[i])
			}
			rel := math.Abs(g-w) / math.Max(math.Abs(w), 1)
			if rel > r.maxDiff {
				r.maxDiff, r.maxDiffAt = rel, fmt.Sprintf("%s against %s in %v", got, want[i][j], row)
			}
			if rel > r.tolerance {
				return fmt.Sprintf("row %d: %v against %v (%.2f%% apart)", i+1, row, want[i], 100*rel)
			}
		}
	}
	return ""
}

// firstDifference shows the first row where two answers differ.
func firstDifference(a, b [][]string) string {
	for i := range max(len(a), len(b)) {
		var x, y []string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if !slices.Equal(x, y) {
			return fmt.Sprintf("row %d: %v against %v", i+1, x, y)
		}
	}
	return "none"
}

// readLog reads the rows each run of each form read from
// system.query_log, flushed first; the log is written asynchronously,
// so it is read again until every query is in it. Type 2 is QueryFinish:
// the 18.16 server keeps the type as a number.
func readLog(ctx context.Context, s *chstore.Store, prefix string, runs int, results []*result) error {
	byKey := map[string]*result{}
	for _, r := range results {
		byKey[r.key] = r
	}
	for attempt := 0; ; attempt++ {
		if err := s.Conn().Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
			return fmt.Errorf("flush the query log: %w", err)
		}
		rows, err := s.Conn().Query(ctx, `SELECT query_id, read_rows, read_bytes FROM system.query_log
WHERE type = 2 AND startsWith(query_id, ?)`, prefix+"-")
		if err != nil {
			return fmt.Errorf("read the query log: %w", err)
		}
		read, readBytes := map[string][]uint64{}, map[string][]uint64{}
		n := 0
		for rows.Next() {
			var id string
			var rr, rb uint64
			if err := rows.Scan(&id, &rr, &rb); err != nil {
				rows.Close()
				return fmt.Errorf("read the query log: %w", err)
			}
			key := strings.TrimPrefix(id, prefix+"-")
			key = key[:strings.LastIndexByte(key, '-')]
			read[key] = append(read[key], rr)
			readBytes[key] = append(readBytes[key], rb)
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read the query log: %w", err)
		}
		if n == runs*len(results) {
			for key, v := range read {
				if r := byKey[key]; r != nil {
					r.readRows, r.readBytes = v, readBytes[key]
				}
			}
			return nil
		}
		if attempt == 10 {
			return fmt.Errorf("the query log holds %d of the %d measured queries", n, runs*len(results))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// queryAll runs sql and returns its rows with every value formatted, so
// that answers of different column types compare as text.
func queryAll(ctx context.Context, s *chstore.Store, sql string) ([][]string, error) {
	rows, err := s.Conn().Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	var out [][]string
	for rows.Next() {
		dest := make([]any, len(types))
		for i, ct := range types {
			dest[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		row := make([]string, len(dest))
		for i, d := range dest {
			v := reflect.ValueOf(d).Elem()
			for v.Kind() == reflect.Pointer && !v.IsNil() {
				v = v.Elem()
			}
			if t, ok := v.Interface().(time.Time); ok {
				row[i] = t.UTC().Format(time.RFC3339)
			} else {
				row[i] = fmt.Sprint(v.Interface())
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// agreement is an error naming every form that answered differently from
// its query's first form.
func (rep *report) agreement() error {
	if len(rep.disagreements) == 0 {
		return nil
	}
	return errors.New("the forms disagree:\n" + strings.Join(rep.disagreements, "\n"))
}

// result returns the result of the form with key.
func (rep *report) result(key string) *result {
	for _, r := range rep.results {
		if r.key == key {
			return r
		}
	}
	return nil
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64)
}

// thousands formats n with commas.
func thousands(n uint64) string {
	s := strconv.FormatUint(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func (rep *report) print(w io.Writer) {
	f := rep.fill
	fmt.Fprintf(w, "\nClickHouse %s on %s.\n", rep.version, machine())
	fmt.Fprintf(w, "Filled %s events over %d days (%s of them written twice, as a redelivery would) in %s: %s events/s, materialized views included. "+
		"%s rows in %d active parts of events when measured; %s rows in %d parts of app_daily.\n",
		thousands(uint64(f.events)), rep.days, thousands(uint64(f.redelivered)), f.took.Round(100*time.Millisecond),
		thousands(uint64(float64(f.events)/f.took.Seconds())), thousands(rep.rows), rep.parts, thousands(rep.rollupRows), rep.rollupParts)
	fmt.Fprintf(w, "app_daily's states on disk, uncompressed: conversations %.1f MiB, users %.1f MiB, turns %.1f MiB.\n",
		float64(rep.stateBytes[0])/(1<<20), float64(rep.stateBytes[1])/(1<<20), float64(rep.stateBytes[2])/(1<<20))
	fmt.Fprintf(w, "Transcript of %s, active %s to %s. One run, medians of %d; load average %s before measuring, %s after.\n\n", rep.session,
		rep.first.Format(time.DateOnly), rep.last.Format(time.DateOnly), rep.runs, rep.load[0], rep.load[1])
	fmt.Fprintln(w, "| query | form | rows read | MiB read | median ms | min–max ms | first form / this: time, rows, bytes |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
	for _, r := range rep.results {
		first := rep.results[r.first]
		ratio := "1 (baseline)"
		if r != first {
			ratio = fmt.Sprintf("%.1f×, %.1f×, %.1f×", first.median().Seconds()/r.median().Seconds(),
				float64(first.rows())/float64(max(r.rows(), 1)), float64(first.bytes())/float64(max(r.bytes(), 1)))
		}
		lo, hi := slices.Min(r.times), slices.Max(r.times)
		fmt.Fprintf(w, "| %s | %s | %s | %.1f | %s | %s–%s | %s |\n", r.query, r.name, thousands(r.rows()), float64(r.bytes())/(1<<20),
			ms(r.median()), ms(lo), ms(hi), ratio)
	}
	fmt.Fprintf(w, "\nAnswers: %d days of conversations; a transcript of %d events.\n",
		len(rep.results[0].answer), len(rep.result("transcript-final").answer))
	for _, r := range rep.results {
		if !r.agrees {
			continue
		}
		if r.maxDiff == 0 {
			fmt.Fprintf(w, "%s: %s answered exactly as %s.\n", r.query, r.name, rep.results[r.first].name)
		} else {
			fmt.Fprintf(w, "%s: %s answered as %s within %.3f%% (largest difference: %s; tolerance %.0f%%).\n",
				r.query, r.name, rep.results[r.first].name, 100*r.maxDiff, r.maxDiffAt, 100*r.tolerance)
		}
	}
	if len(rep.disagreements) > 0 {
		fmt.Fprintln(w, "\nDISAGREEMENTS:")
		for _, d := range rep.disagreements {
			fmt.Fprintln(w, "- "+d)
		}
	}
}
