package admin

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/assistantcms/cms/pkg/content"
)

// recordFlags are the flags that name one record of an app.
type recordFlags struct{ app, kind, id *string }

func addRecordFlags(fs *flag.FlagSet) recordFlags {
	return recordFlags{
		app:  fs.String("app", "", "`APPID` (required)"),
		kind: fs.String("kind", "", "`KIND` of the record: intent, handler, entity, faq, document, or app for the app's own fields (required)"),
		id:   fs.String("id", "", "the record's `ID`; the app's ID for --kind app (required)"),
	}
}

// check validates the flags once parsed.
func (f recordFlags) check() (content.Kind, error) {
	for _, r := range []struct{ name, v string }{{"app", *f.app}, {"kind", *f.kind}, {"id", *f.id}} {
		if err := requireFlag(r.name, r.v); err != nil {
			return "", err
		}
	}
	k := content.Kind(*f.kind)
	if k != content.KindApp && !slices.Contains(content.Kinds(), k) {
		return "", usagef("--kind %q: want intent, handler, entity, faq, document or app", *f.kind)
	}
	return k, nil
}

func historyRevisions(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	rf := addRecordFlags(fs)
	before := fs.Int64("before", 0, "list the revisions before `REVISION`")
	limit := fs.Int("limit", 50, "list at most `N` (up to 1000)")
	asJSON := fs.Bool("json", false, "print JSON, documents included, instead of a table")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	kind, err := rf.check()
	if err != nil {
		return err
	}
	if *limit < 1 || *limit > content.MaxHistoryPage {
		return usagef("--limit %d: want 1 to %d", *limit, content.MaxHistoryPage)
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	if _, err := getApp(ctx, st, *rf.app); err != nil {
		return err
	}
	revs, err := st.Revisions(ctx, *rf.app, kind, *rf.id, *before, *limit)
	if err != nil {
		return fmt.Errorf("read revisions: %w", err)
	}
	if *asJSON {
		type revisionJSON struct {
			Revision  int64           `json:"revision"`
			Deleted   bool            `json:"deleted"`
			ChangedAt time.Time       `json:"changed_at"`
			AuditID   int64           `json:"audit_id"`
			Document  json.RawMessage `json:"document"`
		}
		out := make([]revisionJSON, 0, len(revs))
		for _, r := range revs {
			out = append(out, revisionJSON{r.Revision, r.Deleted, r.ChangedAt, r.AuditID, r.Doc})
		}
		return writeJSON(c.stdout, out)
	}
	rows := [][]string{{"REVISION", "CHANGED", "DELETED", "AUDIT", "BYTES"}}
	for _, r := range revs {
		rows = append(rows, []string{strconv.FormatInt(r.Revision, 10), formatTime(r.ChangedAt), yes(r.Deleted), strconv.FormatInt(r.AuditID, 10), strconv.Itoa(len(r.Doc))})
	}
	return writeTable(c.stdout, rows)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return ""
}

func historyDiff(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	rf := addRecordFlags(fs)
	from := fs.Int64("from", -1, "the earlier `REVISION` (required)")
	to := fs.Int64("to", -1, "the later `REVISION` (required)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	kind, err := rf.check()
	if err != nil {
		return err
	}
	if *from < 0 || *to < 0 {
		return usagef("--from and --to are required")
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	changes, err := content.DiffRevisions(ctx, st, *rf.app, kind, *rf.id, *from, *to)
	var none *content.NoSuchRevision
	switch {
	case errors.As(err, &none):
		return &userError{msg: fmt.Sprintf("%s %q of app %q has no revision %d", kind, *rf.id, *rf.app, none.Revision), err: content.ErrNotFound}
	case err != nil:
		return err
	}
	rows := [][]string{{"FIELD", "BEFORE", "AFTER"}}
	for _, ch := range changes {
		rows = append(rows, []string{ch.Path, string(ch.Before), string(ch.After)})
	}
	return writeTable(c.stdout, rows)
}

func historyAudit(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	app := fs.String("app", "", "`APPID` (required)")
	from := fs.String("from", "", "entries from `TIME` on (RFC 3339)")
	to := fs.String("to", "", "entries before `TIME` (RFC 3339)")
	token := fs.String("token", "", "entries of token `ID`")
	user := fs.String("user", "", "entries of the local `USER` of admin commands")
	operation := fs.String("operation", "", "entries of `OPERATION` (updateHandler, import, ...)")
	kind := fs.String("kind", "", "with --id, entries that changed the record of `KIND`")
	id := fs.String("id", "", "with --kind, entries that changed the record `ID`")
	limit := fs.Int("limit", 50, "list at most `N` (up to 1000)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := requireFlag("app", *app); err != nil {
		return err
	}
	f := content.AuditFilter{AppID: *app, TokenID: *token, LocalUser: *user, Operation: *operation, Kind: content.Kind(*kind), ID: *id, Limit: *limit}
	if (*kind == "") != (*id == "") {
		return usagef("--kind and --id name a record together")
	}
	if *limit < 1 || *limit > content.MaxHistoryPage {
		return usagef("--limit %d: want 1 to %d", *limit, content.MaxHistoryPage)
	}
	for _, tm := range []struct {
		name, v string
		to      *time.Time
	}{{"from", *from, &f.From}, {"to", *to, &f.To}} {
		if tm.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, tm.v)
		if err != nil {
			return usagef("--%s %q: want an RFC 3339 time, such as 2026-12-06T09:30:00Z", tm.name, tm.v)
		}
		*tm.to = t
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	if _, err := getApp(ctx, st, *app); err != nil {
		return err
	}
	entries, err := st.AuditLog(ctx, f)
	if err != nil {
		return fmt.Errorf("read the audit log: %w", err)
	}
	if *asJSON {
		type entryJSON struct {
			ID            int64     `json:"id"`
			At            time.Time `json:"at"`
			Operation     string    `json:"operation"`
			Subject       string    `json:"subject"`
			TokenID       string    `json:"token_id,omitempty"`
			TokenName     string    `json:"token_name,omitempty"`
			LocalUser     string    `json:"local_user,omitempty"`
			ClientNetwork string    `json:"client_network,omitempty"`
			UserAgent     string    `json:"user_agent,omitempty"`
			RequestID     string    `json:"request_id,omitempty"`
			Created       int       `json:"created"`
			Updated       int       `json:"updated"`
			Deleted       int       `json:"deleted"`
			Unchanged     int       `json:"unchanged"`
		}
		out := make([]entryJSON, 0, len(entries))
		for _, e := range entries {
			out = append(out, entryJSON{e.ID, e.At, e.Operation, e.Subject, e.Actor.TokenID, e.Actor.TokenName, e.Actor.LocalUser,
				e.Actor.ClientNet, e.Actor.UserAgent, e.Actor.RequestID, e.Created, e.Updated, e.Deleted, e.Unchanged})
		}
		return writeJSON(c.stdout, out)
	}
	rows := [][]string{{"ID", "AT", "OPERATION", "SUBJECT", "BY", "FROM", "CREATED", "UPDATED", "DELETED", "UNCHANGED"}}
	for _, e := range entries {
		by := e.Actor.LocalUser
		if e.Actor.TokenID != "" {
			by = "token " + e.Actor.TokenID
		}
		rows = append(rows, []string{strconv.FormatInt(e.ID, 10), formatTime(e.At), e.Operation, e.Subject, by, e.Actor.ClientNet,
			strconv.Itoa(e.Created), strconv.Itoa(e.Updated), strconv.Itoa(e.Deleted), strconv.Itoa(e.Unchanged)})
	}
	return writeTable(c.stdout, rows)
}

func historyRestore(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	rf := addRecordFlags(fs)
	revision := fs.Int64("revision", -1, "the `REVISION` to restore (required)")
	ifRevision := fs.Int64("if-revision", 0, "refuse unless the record is at `REVISION` (as last read)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	kind, err := rf.check()
	if err != nil {
		return err
	}
	if *revision < 0 {
		return usagef("--revision is required")
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	out, err := st.RestoreRecord(ctx, *rf.app, kind, *rf.id, *revision, *ifRevision)
	var problem content.Problem
	switch {
	case errors.As(err, &problem):
		return usagef("%s", problem.Message)
	case errors.Is(err, content.ErrNotFound), errors.Is(err, content.ErrStale):
		return &userError{msg: err.Error(), err: err}
	case err != nil:
		return err
	}
	state := "restored"
	if out.Deleted {
		state = "deleted"
	}
	fmt.Fprintf(c.stdout, "%s %s %s at revision %d\n", kind, *rf.id, state, out.Revision)
	return nil
}

func historyRestoreApp(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	app := fs.String("app", "", "`APPID` (required)")
	at := fs.String("at", "", "the `TIME` to restore the app to (RFC 3339, required)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := requireFlag("app", *app); err != nil {
		return err
	}
	if err := requireFlag("at", *at); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, *at)
	if err != nil {
		return usagef("--at %q: want an RFC 3339 time, such as 2026-12-06T09:30:00Z", *at)
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	stats, err := st.RestoreApp(ctx, *app, t, true)
	var problem content.Problem
	switch {
	case errors.As(err, &problem):
		return &userError{msg: problem.Message, err: err}
	case errors.Is(err, content.ErrNotFound):
		return &userError{msg: fmt.Sprintf("app %q not found", *app), err: err}
	case err != nil:
		return err
	}
	fmt.Fprintf(c.stdout, "restored app %s to %s: %d created, %d updated, %d deleted, %d unchanged\n",
		*app, t.UTC().Format(time.RFC3339), stats.Created, stats.Updated, stats.Deleted, stats.Unchanged)
	return nil
}

func historyPrune(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	olderThan := fs.Duration("older-than", content.DefaultRetention, "prune revisions and audit entries older than `AGE`")
	keep := fs.Int("keep", content.DefaultKeepRevisions, "keep each record's newest `N` revisions however old (at least 1)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *olderThan <= 0 {
		return usagef("--older-than %v: want a positive age", *olderThan)
	}
	if *keep < 1 {
		return usagef("--keep %d: want at least 1 (a record's current state)", *keep)
	}
	st, err := c.db(ctx)
	if err != nil {
		return err
	}
	p, err := st.PruneHistory(ctx, time.Now().Add(-*olderThan), *keep)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "pruned %d revisions and %d audit entries\n", p.Revisions, p.Entries)
	return nil
}
