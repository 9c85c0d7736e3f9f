package graphql

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	gql "github.com/graphql-go/graphql"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
)

// HistoryStore reads and restores what content was.
type HistoryStore interface {
	Revisions(ctx context.Context, appID string, kind content.Kind, id string, before int64, limit int) ([]content.Revision, error)
	AuditLog(ctx context.Context, f content.AuditFilter) ([]content.AuditEntry, error)
	RestoreRecord(ctx context.Context, appID string, kind content.Kind, id string, revision, ifRevision int64) (content.Revision, error)
	RestoreApp(ctx context.Context, appID string, at time.Time, appFields bool) (content.ImportStats, error)
}

// historyPage is how many revisions or entries a read answers unless
// asked for fewer or more (up to content.MaxHistoryPage).
const historyPage = 50

// historyTypes are the types of the history fields.
type historyTypes struct {
	kind                         *gql.Enum
	revision, entry, change, out *gql.Object
}

func newHistoryTypes(jsonScalar, revision *gql.Scalar) historyTypes {
	kinds := gql.EnumValueConfigMap{}
	for _, k := range append(content.Kinds(), content.KindApp) {
		kinds[enumName(k)] = &gql.EnumValueConfig{Value: string(k)}
	}
	kinds[enumName(content.KindApp)].Description = "The app's own name and fields (channels included)."
	str, count := nonNull(gql.String), nonNull(gql.Int)
	kind := gql.NewEnum(gql.EnumConfig{Name: "RecordKind", Description: "A kind of record, as history names it.", Values: kinds})
	return historyTypes{
		kind: kind,
		revision: gql.NewObject(gql.ObjectConfig{Name: "RecordRevision", Description: "A state a record has had: what a change made of it, or, deleted, what it held when deleted.",
			Fields: metered(gql.Fields{
				"kind":      field(nonNull(kind), ""),
				"id":        field(nonNull(gql.ID), ""),
				"revision":  field(nonNull(revision), ""),
				"deleted":   field(nonNull(gql.Boolean), "Whether this change deleted the record."),
				"changedAt": field(str, "When (RFC 3339, UTC)."),
				"auditId":   field(nonNull(gql.ID), "The audit entry of the operation that made it."),
				"document":  field(nonNull(jsonScalar), "The record as it was, as REST answers it without the fields the service sets."),
			})}),
		entry: gql.NewObject(gql.ObjectConfig{Name: "AuditEntry", Description: "One operation that changed the app, its content or its tokens.",
			Fields: metered(gql.Fields{
				"id":            field(nonNull(gql.ID), ""),
				"at":            field(str, "When, by the server's clock (RFC 3339, UTC)."),
				"operation":     field(str, "The mutation or command, such as updateHandler, import, token create."),
				"subject":       field(str, "What it names: kind/id of a record, a token's ID; empty for a bulk operation."),
				"tokenId":       field(str, "The token that made it; empty for a local command."),
				"tokenName":     field(str, ""),
				"localUser":     field(str, "The user who ran a local admin command."),
				"clientNetwork": field(str, "The client's network, as rate limits count it."),
				"userAgent":     field(str, ""),
				"requestId":     field(str, ""),
				"created":       field(count, ""),
				"updated":       field(count, ""),
				"deleted":       field(count, ""),
				"unchanged":     field(count, ""),
			})}),
		change: gql.NewObject(gql.ObjectConfig{Name: "FieldChange", Description: "A field that differs between two revisions; an object's members are fields of their own.",
			Fields: metered(gql.Fields{
				"path":   field(str, "The field, members of objects joined with dots."),
				"before": field(jsonScalar, "Absent (null) when the field was not there."),
				"after":  field(jsonScalar, "Absent (null) when the field is not there."),
			})}),
		out: gql.NewObject(gql.ObjectConfig{Name: "RestoreResult", Description: "What restoring an app wrote: records (and the app's own fields) created, updated, deleted and left alone.",
			Fields: metered(gql.Fields{"created": field(count, ""), "updated": field(count, ""), "deleted": field(count, ""), "unchanged": field(count, "")})}),
	}
}

// enumName is a kind as RecordKind spells it.
func enumName(k content.Kind) string { return strings.ToUpper(string(k)) }

// historyQueries are the fields that read history; historyMutations those
// that restore.
func (r *resolvers) historyQueries(h historyTypes, revision *gql.Scalar, args func(gql.FieldConfigArgument) gql.FieldConfigArgument) gql.Fields {
	key := gql.FieldConfigArgument{"kind": {Type: nonNull(h.kind)}, "id": {Type: nonNull(gql.ID)}}
	with := func(extra gql.FieldConfigArgument) gql.FieldConfigArgument {
		a := args(extra)
		for k, v := range key {
			a[k] = v
		}
		return a
	}
	first := &gql.ArgumentConfig{Type: gql.Int, DefaultValue: historyPage, Description: "At most this many, up to 1000."}
	return gql.Fields{
		"revisions": {Type: listOf(h.revision), Description: "A record's revisions, newest first. Needs content:write.",
			Args:    with(gql.FieldConfigArgument{"before": {Type: revision, Description: "The page after this revision."}, "first": first}),
			Resolve: r.revisions},
		"revisionDiff": {Type: listOf(h.change), Description: "The fields that differ from one revision of a record to another. Needs content:write.",
			Args:    with(gql.FieldConfigArgument{"from": {Type: nonNull(revision)}, "to": {Type: nonNull(revision)}}),
			Resolve: r.revisionDiff},
		"auditLog": {Type: listOf(h.entry), Description: "The app's audit log, newest first; every argument narrows it. Needs content:write.",
			Args: args(gql.FieldConfigArgument{
				"from": {Type: gql.String, Description: "From this time on (RFC 3339)."}, "to": {Type: gql.String, Description: "Before this time (RFC 3339)."},
				"tokenId": {Type: gql.ID}, "localUser": {Type: gql.String}, "operation": {Type: gql.String},
				"kind": {Type: h.kind}, "id": {Type: gql.ID, Description: "With kind: the operations on this record."},
				"before": {Type: gql.ID, Description: "The page after this entry."}, "first": first,
			}),
			Resolve: r.auditLog},
	}
}

func (r *resolvers) historyMutations(h historyTypes, revision *gql.Scalar, args func(gql.FieldConfigArgument) gql.FieldConfigArgument) gql.Fields {
	return gql.Fields{
		"restoreRecord": {Type: nonNull(h.revision), Description: "Makes a record what it was at one of its revisions (a deleted one comes back), as a new change: history is never rewritten.",
			Args: args(gql.FieldConfigArgument{"kind": {Type: nonNull(h.kind)}, "id": {Type: nonNull(gql.ID)}, "revision": {Type: nonNull(revision)},
				"ifRevision": {Type: revision, Description: "The record's revision as last read (a deleted record's is its deletion's); refused with CONFLICT if it changed since."}}),
			Resolve: r.restoreRecord},
		"restoreApp": {Type: nonNull(h.out), Description: "Makes all the app's records what they were at a time, in one change: readers see all of before or all of after. The app's own fields are left as they are (api history restore-app restores them too).",
			Args:    args(gql.FieldConfigArgument{"at": {Type: nonNull(gql.String), Description: "RFC 3339."}}),
			Resolve: r.restoreApp},
	}
}

// historyTarget charges a history field, resolves the app and requires
// content:write, which
// management tokens hold: what a record was, and who changed it, is
// for the app's authors, not its runtimes.
func (r *resolvers) historyTarget(p gql.ResolveParams) (auth.Target, error) {
	// The field was charged with the root; its list is charged here, and
	// its objects once read.
	return r.authorTarget(p, true, "content history")
}

// historyKey is the record the kind and id arguments name.
func historyKey(p gql.ResolveParams) (content.Kind, string) {
	kind, _ := p.Args["kind"].(string)
	id, _ := p.Args["id"].(string)
	return content.Kind(kind), id
}

// historyPage is historyTarget for a paged field, with its page's size
// (the first argument).
func (r *resolvers) historyPage(p gql.ResolveParams) (auth.Target, int, error) {
	t, err := r.historyTarget(p)
	if err != nil {
		return t, 0, err
	}
	n, _ := p.Args["first"].(int)
	if n < 1 || n > content.MaxHistoryPage {
		return t, 0, errorf(CodeBadUserInput, "first", "first must be from 1 to %d, got %d", content.MaxHistoryPage, n)
	}
	return t, n, nil
}

// objects charges and answers a list of objects.
func objects[T any](p gql.ResolveParams, items []T, view func(T) map[string]any) (any, error) {
	x := executionOf(p.Context)
	if err := x.chargeObjects(p, len(items), keySize(p)+2+3*int64(len(items))); err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	for i, it := range items {
		out[i] = view(it)
	}
	return out, nil
}

func revisionView(v content.Revision) map[string]any {
	return map[string]any{
		"kind": string(v.Kind), "id": v.ID, "revision": v.Revision, "deleted": v.Deleted,
		"changedAt": v.ChangedAt.UTC().Format(content.TimeLayout), "auditId": strconv.FormatInt(v.AuditID, 10),
		"document": jsonDoc(v.Doc),
	}
}

// jsonDoc is a stored document as the JSON scalar answers it.
func jsonDoc(doc []byte) any {
	if doc == nil {
		return nil
	}
	return json.RawMessage(doc)
}

func entryView(e content.AuditEntry) map[string]any {
	return map[string]any{
		"id": strconv.FormatInt(e.ID, 10), "at": e.At.UTC().Format(content.TimeLayout), "operation": e.Operation, "subject": e.Subject,
		"tokenId": e.Actor.TokenID, "tokenName": e.Actor.TokenName, "localUser": e.Actor.LocalUser,
		"clientNetwork": e.Actor.ClientNet, "userAgent": e.Actor.UserAgent, "requestId": e.Actor.RequestID,
		"created": e.Created, "updated": e.Updated, "deleted": e.Deleted, "unchanged": e.Unchanged,
	}
}

func (r *resolvers) revisions(p gql.ResolveParams) (any, error) {
	t, n, err := r.historyPage(p)
	if err != nil {
		return nil, err
	}
	kind, id := historyKey(p)
	before, _ := p.Args["before"].(int64)
	revs, err := r.store.Revisions(p.Context, t.AppID, kind, id, before, n)
	if err != nil {
		return nil, storeError(err)
	}
	// The documents are held until the answer is written, whether it
	// selects them or not (then they are charged again): many aliases of
	// this field cannot hold more than the answer's budget.
	var held int64
	for _, rev := range revs {
		held += int64(len(rev.Doc))
	}
	if err := executionOf(p.Context).charge(p, 0, held); err != nil {
		return nil, err
	}
	return objects(p, revs, revisionView)
}

func (r *resolvers) revisionDiff(p gql.ResolveParams) (any, error) {
	t, err := r.historyTarget(p)
	if err != nil {
		return nil, err
	}
	kind, id := historyKey(p)
	from, _ := p.Args["from"].(int64)
	to, _ := p.Args["to"].(int64)
	changes, err := content.DiffRevisions(p.Context, r.store, t.AppID, kind, id, from, to)
	var none *content.NoSuchRevision
	switch {
	case errors.As(err, &none):
		arg := map[bool]string{false: "from", true: "to"}[none.Second]
		return nil, errorf(CodeNotFound, arg, "%s %q of app %q has no revision %d", kind, id, t.AppID, none.Revision)
	case err != nil:
		return nil, storeError(err)
	}
	return objects(p, changes, func(c content.FieldChange) map[string]any {
		return map[string]any{"path": c.Path, "before": jsonDoc(c.Before), "after": jsonDoc(c.After)}
	})
}

func (r *resolvers) auditLog(p gql.ResolveParams) (any, error) {
	t, n, err := r.historyPage(p)
	if err != nil {
		return nil, err
	}
	f := content.AuditFilter{AppID: t.AppID, Limit: n}
	for _, tm := range []struct {
		arg string
		to  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if s, ok := p.Args[tm.arg].(string); ok {
			if *tm.to, err = time.Parse(time.RFC3339Nano, s); err != nil {
				return nil, errorf(CodeBadUserInput, tm.arg, "%s must be an RFC 3339 time, such as 2026-12-06T09:30:00Z", tm.arg)
			}
		}
	}
	f.TokenID, _ = p.Args["tokenId"].(string)
	f.LocalUser, _ = p.Args["localUser"].(string)
	f.Operation, _ = p.Args["operation"].(string)
	kind, id := historyKey(p)
	if (kind == "") != (id == "") {
		return nil, errorf(CodeBadUserInput, "id", "kind and id name a record together")
	}
	f.Kind, f.ID = kind, id
	if s, ok := p.Args["before"].(string); ok {
		if f.Before, err = strconv.ParseInt(s, 10, 64); err != nil || f.Before < 1 {
			return nil, errorf(CodeBadUserInput, "before", "before must be an audit entry's ID")
		}
	}
	entries, err := r.store.AuditLog(p.Context, f)
	if err != nil {
		return nil, storeError(err)
	}
	return objects(p, entries, entryView)
}

func (r *resolvers) restoreRecord(p gql.ResolveParams) (any, error) {
	if err := executionOf(p.Context).chargeObjects(p, 1, keySize(p)); err != nil {
		return nil, err
	}
	t, err := r.target(p.Context, p.Args["appId"])
	if err != nil {
		return nil, err
	}
	kind, id := historyKey(p)
	rev, _ := p.Args["revision"].(int64)
	out, err := r.store.RestoreRecord(auditedAs(p), t.AppID, kind, id, rev, ifRevision(p))
	var stale *content.Stale
	var problem content.Problem
	switch {
	case errors.Is(err, content.ErrNotFound):
		return nil, errorf(CodeNotFound, "revision", "%s %q of app %q has no revision %d", kind, id, t.AppID, rev)
	case errors.As(err, &stale):
		e := errorf(CodeConflict, "ifRevision", "%s", stale.Error())
		e.current = stale.Current
		return nil, e
	case errors.As(err, &problem):
		return nil, errorf(CodeBadUserInput, problem.Path, "%s", problem.Message)
	case err != nil:
		return nil, storeError(err)
	}
	r.changed(t.AppID, t.TokenID)
	executionOf(p.Context).wrote(p)
	return revisionView(out), nil
}

func (r *resolvers) restoreApp(p gql.ResolveParams) (any, error) {
	if err := executionOf(p.Context).chargeObjects(p, 1, keySize(p)); err != nil {
		return nil, err
	}
	t, err := r.target(p.Context, p.Args["appId"])
	if err != nil {
		return nil, err
	}
	at, err := time.Parse(time.RFC3339Nano, p.Args["at"].(string))
	if err != nil {
		return nil, errorf(CodeBadUserInput, "at", "at must be an RFC 3339 time, such as 2026-12-06T09:30:00Z")
	}
	// The app's own fields (its channels' keys among them) are an
	// operator's to restore, with api history restore-app: a content
	// token never changes them.
	stats, err := r.store.RestoreApp(auditedAs(p), t.AppID, at, false)
	var problem content.Problem
	switch {
	case errors.As(err, &problem):
		return nil, errorf(CodeBadUserInput, problem.Path, "%s", problem.Message)
	case err != nil:
		return nil, storeError(err)
	}
	r.changed(t.AppID, t.TokenID)
	executionOf(p.Context).wrote(p)
	return map[string]any{"created": stats.Created, "updated": stats.Updated, "deleted": stats.Deleted, "unchanged": stats.Unchanged}, nil
}
