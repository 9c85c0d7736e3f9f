// Package forgetuser deletes one user's rows of one app from every
// ClickHouse table of the pipeline holding them (events, quarantine,
// sessions and the tables of asked queries), on one server or every
// replica of a cluster, and reports what it found and deleted.
package forgetuser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// Request names the user Forget deletes, and how.
type Request struct {
	AppID, UserID string
	// DryRun counts what would be deleted and deletes nothing.
	DryRun bool
	// Poll is how often the mutations and the rows left are checked; 0
	// means DefaultPoll.
	Poll time.Duration
}

// DefaultPoll is the default of Request.Poll.
const DefaultPoll = 250 * time.Millisecond

// Forgotten is what Forget found, and deleted unless DryRun.
type Forgotten struct {
	AppID, UserID string
	DryRun        bool
	// Sessions, Queries and Quarantined count the user's sessions, the
	// normalised queries only the user asked in the app, and the user's
	// quarantined events.
	Sessions, Queries, Quarantined int
	// Rows is, per table with rows of the user, how many rows matched
	// before the deletion, in the order the tables are deleted from.
	Rows []TableRows
	// Mutations is how many ALTER TABLE ... DELETE statements were issued
	// on each shard (on the server, without a cluster).
	Mutations int
}

// Report writes what was found and what was deleted, a table a line.
// The queries and session IDs themselves are not written: they are the
// data being forgotten, and the output may well be kept in a log.
func (f Forgotten) Report(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "user %q of app %q: %d sessions, %d queries only they asked, %d quarantined events\n",
		f.UserID, f.AppID, f.Sessions, f.Queries, f.Quarantined)
	done := "deleted"
	if f.DryRun {
		done = "to delete (dry run: nothing deleted)"
	}
	for _, r := range f.Rows {
		fmt.Fprintf(&b, "%-16s %d rows %s\n", r.Table, r.Rows, done)
	}
	if len(f.Rows) == 0 {
		b.WriteString("no rows to delete\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// TableRows is how many rows of a table matched.
type TableRows struct {
	Table string
	Rows  uint64
}

// maxListBytes bounds the quoted values of one statement's IN list. The
// 18.16 server refuses a statement longer than max_query_size (256 KiB by
// default) and a replicated table keeps every mutation's text in a
// ZooKeeper node, so long lists are split over several statements.
const maxListBytes = 64 << 10

// forgetPlan is what a user's data is, found before anything is deleted:
// once the user's events are gone, which queries only they asked can no
// longer be told.
type forgetPlan struct {
	app, user string
	// sessions are the session IDs of the user's events.
	sessions []string
	// queries are the normalised queries the user asked and no other user
	// of the app did.
	queries []string
	// quarantined are the event IDs of the app's quarantined events whose
	// top-level userId is the user.
	quarantined []string
}

// deletion is the rows of one table that go: those matching any of
// wheres, each short enough for one statement.
type deletion struct {
	table  string
	wheres []string
}

// deletions lists, table by table, the conditions of the rows of the
// plan. Tables with nothing to match are left out.
func (p forgetPlan) deletions() []deletion {
	app := "app_id = " + quoteLiteral(p.app)
	out := []deletion{{table: "events", wheres: []string{app + " AND user_id = " + quoteLiteral(p.user)}}}
	if len(p.quarantined) > 0 {
		out = append(out, deletion{table: "quarantine", wheres: inLists(app+" AND event_id IN ", p.quarantined)})
	}
	if len(p.sessions) > 0 {
		out = append(out, deletion{table: "sessions", wheres: inLists(app+" AND session_id IN ", p.sessions)})
	}
	out = append(out, deletion{table: "user_queries", wheres: []string{app + " AND user_id = " + quoteLiteral(p.user)}})
	if len(p.queries) > 0 {
		wheres := inLists(app+" AND query IN ", p.queries)
		for _, t := range []string{"query_counts_daily", "query_sources", "unanswered_daily", "gap_daily"} {
			out = append(out, deletion{table: t, wheres: wheres})
		}
	}
	return out
}

// inLists is prefix followed by a parenthesised list of values, split
// into as many conditions as keep each list within maxListBytes.
func inLists(prefix string, values []string) []string {
	var out []string
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			out = append(out, prefix+"("+b.String()+")")
			b.Reset()
		}
	}
	for _, v := range values {
		q := quoteLiteral(v)
		if b.Len() > 0 && b.Len()+len(q)+2 > maxListBytes {
			flush()
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(q)
	}
	flush()
	return out
}

// quoteLiteral quotes s as a ClickHouse string literal: backslashes and
// quotes escaped, every other byte as it is, which the server reads back
// unchanged.
func quoteLiteral(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}

// Forget deletes one user's rows of one app from every table of s holding
// them, with ALTER TABLE ... DELETE mutations, and returns once the
// mutations are done and the rows are gone from every server, or when
// ctx ends. See docs/operating.md, "Forgetting a user", for what is
// deleted and what stays. With r.DryRun it only counts.
//
// On a cluster the rows are in the shard-local tables. The mutations are
// issued on one replica of each shard, not ON CLUSTER (which 18.x servers
// have aborted on), and replicate to its partners; then every replica is
// waited on.
func Forget(ctx context.Context, s *chstore.Store, r Request, log *slog.Logger) (Forgotten, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if r.AppID == "" || r.UserID == "" {
		return Forgotten{}, errors.New("forget a user: want an app ID and a user ID")
	}
	if r.Poll <= 0 {
		r.Poll = DefaultPoll
	}
	p, err := planForget(ctx, s, r.AppID, r.UserID)
	if err != nil {
		return Forgotten{}, err
	}
	out := Forgotten{AppID: r.AppID, UserID: r.UserID, DryRun: r.DryRun, Sessions: len(p.sessions), Queries: len(p.queries), Quarantined: len(p.quarantined)}
	dels, err := countDeletions(ctx, s, p, &out)
	if err != nil {
		return out, err
	}
	log.Info("user's rows found", "app", r.AppID, "sessions", out.Sessions, "queries", out.Queries,
		"quarantined", out.Quarantined, "tables", len(dels), "dry_run", r.DryRun)
	if r.DryRun || len(dels) == 0 {
		return out, nil
	}
	shards, err := shardsOf(ctx, s)
	if err != nil {
		return out, err
	}
	for _, d := range dels {
		out.Mutations += len(d.wheres)
	}
	// Each shard's replicas, connected once for the mutations and the
	// wait; a replica that cannot be reached yet is tried again.
	conns := make(replicas, len(shards))
	defer conns.close(s)
	ids, err := issueDeletions(ctx, s, shards, conns, dels, r.Poll, log)
	if err != nil {
		return out, err
	}
	if err := waitForgotten(ctx, s, shards, conns, ids, dels, r.Poll, log); err != nil {
		return out, err
	}
	return out, nil
}

// countDeletions counts, through the tables every server or shard is read
// by, the rows each deletion of the plan matches, adds them to out and
// returns the deletions that match any.
func countDeletions(ctx context.Context, s *chstore.Store, p forgetPlan, out *Forgotten) ([]deletion, error) {
	var dels []deletion
	for _, d := range p.deletions() {
		n, err := countRows(ctx, s, s.Table(d.table), d.wheres)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			out.Rows = append(out.Rows, TableRows{Table: d.table, Rows: n})
			dels = append(dels, d)
		}
	}
	return dels, nil
}

// replicas are the connections to each shard's replicas, by shard and
// replica, nil where a replica has not been reached (yet).
type replicas [][]*chstore.Store

// close closes the connections, all but s itself.
func (rs replicas) close(s *chstore.Store) {
	for _, shard := range rs {
		for _, c := range shard {
			if c != nil && c != s {
				c.Close()
			}
		}
	}
}

// issueDeletions connects every replica of every shard it can and issues
// the deletions' mutations on one replica of each shard. It returns, per
// shard and table, the IDs of the mutations issued there.
func issueDeletions(ctx context.Context, s *chstore.Store, shards [][]string, conns replicas, dels []deletion, poll time.Duration, log *slog.Logger) ([]map[string][]string, error) {
	ids := make([]map[string][]string, len(shards))
	for i, shard := range shards {
		conns[i] = make([]*chstore.Store, len(shard))
		issuer, err := connectShard(ctx, s, shard, conns[i])
		if err != nil {
			return nil, fmt.Errorf("forget user: no replica of shard %d answers: %w", i+1, err)
		}
		ids[i] = map[string][]string{}
		for _, d := range dels {
			if ids[i][d.table], err = mutate(ctx, s, issuer, d, poll); err != nil {
				return nil, err
			}
			log.Info("mutation issued", "server", issuer.Addrs(), "table", s.LocalTable(d.table), "statements", len(d.wheres), "mutations", ids[i][d.table])
		}
	}
	return ids, nil
}

// connectShard connects the replicas of one shard into conns, those it
// can, and returns the first connected; an error only when none answers.
func connectShard(ctx context.Context, s *chstore.Store, shard []string, conns []*chstore.Store) (*chstore.Store, error) {
	var first *chstore.Store
	var errs []error
	for j, addr := range shard {
		c, err := s.OpenReplica(ctx, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		conns[j] = c
		if first == nil {
			first = c
		}
	}
	if first == nil {
		return nil, errors.Join(errs...)
	}
	return first, nil
}

// planForget finds the user's sessions, their own queries and their
// quarantined events, through the tables every server or shard is read
// by. Sessions are found in events and in the sessions rollup, queries in
// events and in user_queries, which keeps them as long as the tables of
// queries do: those of expired events are found too.
func planForget(ctx context.Context, s *chstore.Store, app, user string) (forgetPlan, error) {
	p := forgetPlan{app: app, user: user}
	var err error
	// The sessions rollup names each session's user, so that sessions of
	// expired events are found too.
	sessions, err := stringColumn(ctx, s, "SELECT DISTINCT session_id FROM "+s.Table("events")+" WHERE app_id = ? AND user_id = ? AND session_id != '' "+
		"UNION ALL SELECT session_id FROM "+s.Table("sessions")+" WHERE app_id = ? GROUP BY session_id HAVING anyIfMerge(user_id) = ?", app, user, app, user)
	if err != nil {
		return p, fmt.Errorf("read the sessions of user %s of app %s: %w", user, app, err)
	}
	p.sessions = unique(sessions)
	asked, err := stringColumn(ctx, s, "SELECT DISTINCT query_normalized FROM "+s.Table("events")+" WHERE app_id = ? AND user_id = ? AND query_normalized != '' "+
		"UNION ALL SELECT DISTINCT query FROM "+s.Table("user_queries")+" WHERE app_id = ? AND user_id = ?", app, user, app, user)
	if err != nil {
		return p, fmt.Errorf("read the queries of user %s of app %s: %w", user, app, err)
	}
	asked = unique(asked)
	shared := map[string]bool{}
	for _, in := range inLists(" IN ", asked) {
		// Literals only: with parameters, the driver turns "\?" into "?"
		// even inside a literal, and a query text may hold that.
		others, err := stringColumn(ctx, s, "SELECT DISTINCT query_normalized FROM "+s.Table("events")+" WHERE app_id = "+quoteLiteral(app)+
			" AND user_id != "+quoteLiteral(user)+" AND query_normalized"+in+
			" UNION ALL SELECT DISTINCT query FROM "+s.Table("user_queries")+" WHERE app_id = "+quoteLiteral(app)+
			" AND user_id != "+quoteLiteral(user)+" AND query"+in)
		if err != nil {
			return p, fmt.Errorf("read which queries of user %s other users of app %s asked: %w", user, app, err)
		}
		for _, q := range others {
			shared[q] = true
		}
	}
	for _, q := range asked {
		if !shared[q] {
			p.queries = append(p.queries, q)
		}
	}
	if p.quarantined, err = quarantinedOf(ctx, s, app, user); err != nil {
		return p, err
	}
	sort.Strings(p.sessions)
	sort.Strings(p.queries)
	return p, nil
}

// quarantinedOf returns the IDs of the app's quarantined events whose
// top-level userId is user. The 18.16 server has no JSON functions but
// visitParamExtractString, which takes the first "userId" at any depth
// and none followed by a space, so the server only narrows the rows to
// those holding the ID's JSON text (or an escape that may spell it
// differently) and the events are read here.
func quarantinedOf(ctx context.Context, s *chstore.Store, app, user string) ([]string, error) {
	q, err := quarantineCandidates(s.Table("quarantine"), app, user)
	if err != nil {
		return nil, err
	}
	rows, err := s.Conn().Query(s.Context(ctx), q)
	if err != nil {
		return nil, fmt.Errorf("read the quarantined events of app %s: %w", app, err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	var out []string
	for rows.Next() {
		var id, event string
		if err := rows.Scan(&id, &event); err != nil {
			return nil, fmt.Errorf("read the quarantined events of app %s: %w", app, err)
		}
		if !seen[id] && topLevelUserID(event) == user {
			seen[id] = true
			out = append(out, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the quarantined events of app %s: %w", app, err)
	}
	sort.Strings(out)
	return out, nil
}

// quarantineCandidates is the query of the event IDs and events of the
// app's rows of table (quarantine) that may hold the user's ID: those
// holding its JSON text, or an escape that may spell it differently.
func quarantineCandidates(table, app, user string) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(user); err != nil {
		return "", fmt.Errorf("encode user ID %q: %w", user, err)
	}
	text := strings.TrimSuffix(strings.TrimSpace(b.String()), `"`)[1:]
	return "SELECT event_id, event FROM " + table + " WHERE app_id = " + quoteLiteral(app) +
		" AND (position(event, " + quoteLiteral(text) + ") > 0 OR position(event, " + quoteLiteral(`\u`) + ") > 0 OR position(event, " + quoteLiteral(`\/`) + ") > 0)", nil
}

// deleteStatement is the mutation that deletes the rows of table matching
// where.
func deleteStatement(table, where string) string {
	return "ALTER TABLE " + table + " DELETE WHERE " + where
}

// topLevelUserID is the string value of the "userId" member of the JSON
// object event, or "". It reads only up to that member, so an event cut
// short after it (a truncated quarantined event) still tells.
func topLevelUserID(event string) string {
	dec := json.NewDecoder(strings.NewReader(event))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return ""
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return ""
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return ""
		}
		if key == "userId" {
			var id string
			if json.Unmarshal(value, &id) != nil {
				return ""
			}
			return id
		}
	}
	return ""
}

// unique returns the distinct values of vs, in their first order.
func unique(vs []string) []string {
	seen := make(map[string]bool, len(vs))
	out := vs[:0:0]
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// stringColumn runs a query of one String column and returns its values.
func stringColumn(ctx context.Context, s *chstore.Store, query string, args ...any) ([]string, error) {
	rows, err := s.Conn().Query(s.Context(ctx), query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// countRows counts the rows of table, on server c, that match any of
// wheres (which match disjoint rows).
func countRows(ctx context.Context, c *chstore.Store, table string, wheres []string) (uint64, error) {
	var total uint64
	for _, w := range wheres {
		var n uint64
		if err := c.Conn().QueryRow(c.Context(ctx), "SELECT count() FROM "+table+" WHERE "+w).Scan(&n); err != nil {
			return 0, fmt.Errorf("count rows of %s on %v: %w", table, c.Addrs(), err)
		}
		total += n
	}
	return total, nil
}

// shardsOf lists the addresses of every shard's replicas, from the
// cluster's definition on the connected server: one shard of the
// configured addresses ("", the store itself) without a cluster.
func shardsOf(ctx context.Context, s *chstore.Store) ([][]string, error) {
	if s.Cluster() == "" {
		return [][]string{{""}}, nil
	}
	rows, err := s.Conn().Query(s.Context(ctx), "SELECT shard_num, host_name, port FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num", s.Cluster())
	if err != nil {
		return nil, fmt.Errorf("read the servers of cluster %s: %w", s.Cluster(), err)
	}
	defer rows.Close()
	var out [][]string
	last := uint32(0)
	for rows.Next() {
		var shard uint32
		var host string
		var port uint16
		if err := rows.Scan(&shard, &host, &port); err != nil {
			return nil, fmt.Errorf("read the servers of cluster %s: %w", s.Cluster(), err)
		}
		if shard != last || len(out) == 0 {
			out, last = append(out, nil), shard
		}
		out[len(out)-1] = append(out[len(out)-1], fmt.Sprintf("%s:%d", host, port))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the servers of cluster %s: %w", s.Cluster(), err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cluster %s has no servers", s.Cluster())
	}
	return out, nil
}

// mutate issues the deletion's statements on server c and returns the
// IDs of the mutations they made.
func mutate(ctx context.Context, s, c *chstore.Store, d deletion, poll time.Duration) ([]string, error) {
	table := s.LocalTable(d.table)
	before, err := mutations(ctx, s, c, d.table)
	if err != nil {
		return nil, err
	}
	for _, w := range d.wheres {
		if err := c.Conn().Exec(c.Context(ctx), deleteStatement(table, w)); err != nil {
			return nil, fmt.Errorf("delete the user's rows of %s on %v: %w", table, c.Addrs(), err)
		}
	}
	// A replicated table lists a mutation once the server has read it back
	// from ZooKeeper, a moment after the statement returns. Mutations
	// another client issued meanwhile are taken too: waiting for them as
	// well is harmless.
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		now, err := mutations(ctx, s, c, d.table)
		if err != nil {
			return nil, err
		}
		var issued []string
		for id := range now {
			if !before[id] {
				issued = append(issued, id)
			}
		}
		if len(issued) >= len(d.wheres) {
			sort.Strings(issued)
			return issued, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("mutations of %s on %v not listed: %w", table, c.Addrs(), ctx.Err())
		case <-t.C:
		}
	}
}

// mutations returns server c's mutations of a table of s, each with
// whether it is done.
func mutations(ctx context.Context, s, c *chstore.Store, table string) (map[string]bool, error) {
	local := table
	if s.Cluster() != "" {
		local += chschema.LocalSuffix
	}
	rows, err := c.Conn().Query(c.Context(ctx), "SELECT mutation_id, is_done FROM system.mutations WHERE database = ? AND table = ?", s.Database(), local)
	if err != nil {
		return nil, fmt.Errorf("read the mutations of %s on %v: %w", local, c.Addrs(), err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		var done uint8
		if err := rows.Scan(&id, &done); err != nil {
			return nil, fmt.Errorf("read the mutations of %s on %v: %w", local, c.Addrs(), err)
		}
		out[id] = done == 1
	}
	return out, rows.Err()
}

// waitForgotten waits until, on every replica of every shard, the
// mutations issued there are done and no row they delete is left. Both
// are checked: a restarted 18.16 replica has reported a mutation done
// before rewriting its parts.
func waitForgotten(ctx context.Context, s *chstore.Store, shards [][]string, conns replicas, ids []map[string][]string, dels []deletion, poll time.Duration, log *slog.Logger) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	done := make([][]bool, len(shards))
	for i := range shards {
		done[i] = make([]bool, len(shards[i]))
	}
	var pending []string
	for {
		pending = pending[:0]
		for i, shard := range shards {
			for j, addr := range shard {
				if done[i][j] {
					continue
				}
				left, err := leftOn(ctx, s, &conns[i][j], addr, ids[i], dels)
				if err != nil {
					if ctx.Err() != nil {
						return fmt.Errorf("forget user: %w", err)
					}
					left = err.Error()
				}
				if left == "" {
					done[i][j] = true
					log.Info("user's rows gone", "server", conns[i][j].Addrs())
					continue
				}
				pending = append(pending, left)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("forget user: still waiting: %s: %w", strings.Join(pending, "; "), ctx.Err())
		case <-t.C:
		}
	}
}

// leftOn says what is not yet done on one replica, "" when nothing is.
// The replica is connected first if it has not been yet, and again after
// an error.
func leftOn(ctx context.Context, s *chstore.Store, conn **chstore.Store, addr string, ids map[string][]string, dels []deletion) (string, error) {
	if *conn == nil {
		c, err := s.OpenReplica(ctx, addr)
		if err != nil {
			return "", err
		}
		*conn = c
	}
	c := *conn
	fail := func(err error) (string, error) {
		if c != s {
			c.Close()
			*conn = nil
		}
		return "", err
	}
	for _, d := range dels {
		ms, err := mutations(ctx, s, c, d.table)
		if err != nil {
			return fail(err)
		}
		for _, id := range ids[d.table] {
			if !ms[id] {
				return fmt.Sprintf("mutation %s of %s on %v", id, s.LocalTable(d.table), c.Addrs()), nil
			}
		}
		n, err := countRows(ctx, c, s.LocalTable(d.table), d.wheres)
		if err != nil {
			return fail(err)
		}
		if n > 0 {
			return fmt.Sprintf("%d rows of %s on %v", n, s.LocalTable(d.table), c.Addrs()), nil
		}
	}
	return "", nil
}
