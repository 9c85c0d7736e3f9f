package graphql

import (
	"context"
	"errors"
	"strconv"
	"time"

	gql "github.com/graphql-go/graphql"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
)

// PublishStore keeps an app's draft apart from what its runtimes read
// (see content.Version).
type PublishStore interface {
	Publishing(ctx context.Context, app string) (content.Publishing, error)
	SetPublishing(ctx context.Context, app string, on bool) (content.Publishing, error)
	Publish(ctx context.Context, app string) (content.Version, bool, error)
	PublishRecords(ctx context.Context, app string, kind content.Kind, ids []string, revisions []int64) (content.Version, bool, error)
	Rollback(ctx context.Context, app string, number int64) (content.Version, error)
	Versions(ctx context.Context, app string, before int64, limit int) ([]content.Version, error)
	DraftDiff(ctx context.Context, app string) (content.DraftDiff, error)
}

// publishTypes are the types of the publishing fields.
type publishTypes struct {
	version, publishing, result, diff *gql.Object
}

func newPublishTypes(revision *gql.Scalar, h historyTypes) publishTypes {
	version := gql.NewObject(gql.ObjectConfig{Name: "Version", Description: "A published state of the app's content.",
		Fields: metered(gql.Fields{
			"number":      field(nonNull(gql.Int), "Counts the app's versions from 1."),
			"revision":    field(nonNull(revision), "The app's revision it published: its records are as they were then."),
			"publishedAt": field(nonNull(gql.String), "RFC 3339, UTC."),
			"auditId":     field(nonNull(gql.ID), "The audit entry of the publish that made it."),
			"records":     field(nonNull(gql.Int), ""),
			"live":        field(nonNull(gql.Boolean), "Whether the app's runtimes read it."),
		})})
	change := gql.NewObject(gql.ObjectConfig{Name: "DraftChange", Description: "A record that differs between the live version and the draft.",
		Fields: metered(gql.Fields{
			"kind":          field(nonNull(h.kind), ""),
			"id":            field(nonNull(gql.ID), ""),
			"change":        field(nonNull(gql.String), "added, changed or removed: what publishing does to it."),
			"liveRevision":  field(revision, "Its revision in the live version; null when added."),
			"draftRevision": field(revision, "Its revision in the draft; null when removed."),
			"fields":        field(listOf(h.change), "The fields that differ, live before, draft after."),
		})})
	return publishTypes{
		version: version,
		publishing: gql.NewObject(gql.ObjectConfig{Name: "Publishing", Description: "Whether the app publishes: then writes change its draft, and its runtimes read its live version.",
			Fields: metered(gql.Fields{
				"on":   field(nonNull(gql.Boolean), ""),
				"live": field(gql.Int, "The live version's number; null when publishing is off."),
			})}),
		result: gql.NewObject(gql.ObjectConfig{Name: "PublishResult", Description: "What a publish made live.",
			Fields: metered(gql.Fields{
				"version":   field(nonNull(version), "The live version."),
				"published": field(nonNull(gql.Boolean), "False when the draft was what is live already: no version was made."),
			})}),
		diff: gql.NewObject(gql.ObjectConfig{Name: "DraftDiff", Description: "What publishing the draft would change.",
			Fields: metered(gql.Fields{
				"live":      field(gql.Int, "The live version compared with; null when publishing is off (the draft is live)."),
				"changes":   field(listOf(change), "Record by record, by kind and ID."),
				"truncated": field(nonNull(gql.Boolean), "More records differ than are listed (1,000, or 8 MiB of the fields' values)."),
			})}),
	}
}

func (r *resolvers) publishQueries(t publishTypes, args func(gql.FieldConfigArgument) gql.FieldConfigArgument) gql.Fields {
	return gql.Fields{
		"publishing": {Type: nonNull(t.publishing), Description: "Whether the app publishes, and its live version. Needs content:write.", Args: args(nil), Resolve: r.publishing},
		"versions": {Type: listOf(t.version), Description: "The app's published versions, newest first. Needs content:write.",
			Args: args(gql.FieldConfigArgument{"before": {Type: gql.Int, Description: "The page after this version."},
				"first": {Type: gql.Int, DefaultValue: content.MaxVersionsPage, Description: "At most this many (up to 100)."}}),
			Resolve: r.versions},
		"draftDiff": {Type: nonNull(t.diff), Description: "What publishing the draft would change, record by record and field by field. Needs content:write.",
			Args: args(nil), Resolve: r.draftDiff},
	}
}

func (r *resolvers) publishMutations(t publishTypes, args func(gql.FieldConfigArgument) gql.FieldConfigArgument) gql.Fields {
	return gql.Fields{
		"setPublishing": {Type: nonNull(t.publishing),
			Description: "Turns publishing on (the draft is published as the first live version, so runtimes keep reading what they read) or off (runtimes read every write at once again; versions stay).",
			Args:        args(gql.FieldConfigArgument{"on": {Type: nonNull(gql.Boolean)}}), Resolve: r.setPublishing},
		"publish": {Type: nonNull(t.result), Description: "Makes the whole draft a new version, live at once: readers see all of the old or all of the new.",
			Args: args(nil), Resolve: r.publish},
		"rollback": {Type: nonNull(t.version), Description: "Makes an earlier version live again, in one step. The draft is left as it is.",
			Args: args(gql.FieldConfigArgument{"version": {Type: nonNull(gql.Int)}}), Resolve: r.rollback},
	}
}

func publishingView(pub content.Publishing) map[string]any {
	out := map[string]any{"on": pub.On, "live": nil}
	if pub.On {
		out["live"] = int(pub.Live)
	}
	return out
}

func versionView(v content.Version) map[string]any {
	return map[string]any{"number": int(v.Number), "revision": v.Revision, "publishedAt": v.PublishedAt.UTC().Format(content.TimeLayout),
		"auditId": strconv.FormatInt(v.AuditID, 10), "records": v.Records, "live": v.Live}
}

// publishError answers the store's refusals of publishing.
func publishError(err error, app string) error {
	switch {
	case errors.Is(err, content.ErrNotPublishing):
		return errorf(CodeBadUserInput, "", "app %q does not publish: turn publishing on with setPublishing first", app)
	case errors.Is(err, content.ErrNotFound):
		return errorf(CodeNotFound, "version", "app %q has no such version", app)
	}
	return storeError(err)
}

func (r *resolvers) publishing(p gql.ResolveParams) (any, error) {
	t, err := r.authorTarget(p, false, "publishing")
	if err != nil {
		return nil, err
	}
	pub, err := r.store.Publishing(p.Context, t.AppID)
	if err != nil {
		return nil, storeError(err)
	}
	return publishingView(pub), nil
}

func (r *resolvers) versions(p gql.ResolveParams) (any, error) {
	t, err := r.authorTarget(p, true, "publishing")
	if err != nil {
		return nil, err
	}
	n, _ := p.Args["first"].(int)
	if n < 1 || n > content.MaxVersionsPage {
		return nil, errorf(CodeBadUserInput, "first", "first must be from 1 to %d, got %d", content.MaxVersionsPage, n)
	}
	before, _ := p.Args["before"].(int)
	vs, err := r.store.Versions(p.Context, t.AppID, int64(before), n)
	if err != nil {
		return nil, storeError(err)
	}
	return objects(p, vs, versionView)
}

func (r *resolvers) draftDiff(p gql.ResolveParams) (any, error) {
	t, err := r.authorTarget(p, false, "publishing")
	if err != nil {
		return nil, err
	}
	d, err := r.store.DraftDiff(p.Context, t.AppID)
	if err != nil {
		return nil, storeError(err)
	}
	// The fields' values are held until the answer is written, as
	// revisions' documents are: charged whether selected or not.
	var held int64
	for _, c := range d.Changes {
		for _, f := range c.Fields {
			held += int64(len(f.Before) + len(f.After) + len(f.Path))
		}
	}
	x := executionOf(p.Context)
	if err := x.charge(p, 0, held); err != nil {
		return nil, err
	}
	var live any
	if d.Live > 0 {
		live = int(d.Live)
	}
	changes, err := objects(p, d.Changes, func(c content.DraftChange) map[string]any {
		fields := make([]any, len(c.Fields))
		for i, f := range c.Fields {
			fields[i] = map[string]any{"path": f.Path, "before": jsonDoc(f.Before), "after": jsonDoc(f.After)}
		}
		out := map[string]any{"kind": string(c.Kind), "id": c.ID, "change": c.Change, "liveRevision": nil, "draftRevision": nil, "fields": fields}
		if c.LiveRevision > 0 {
			out["liveRevision"] = c.LiveRevision
		}
		if c.DraftRevision > 0 {
			out["draftRevision"] = c.DraftRevision
		}
		return out
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"live": live, "changes": changes, "truncated": d.Truncated}, nil
}

// mayPublish takes one of the app's versions a minute, or refuses with
// RATE_LIMITED saying when one is free; undo gives it back when the
// operation made no version.
func (r *resolvers) mayPublish(app string) (undo func(), err error) {
	ok, wait := r.publishes.Allow(app)
	if !ok {
		return nil, errorf(CodeRateLimited, "", "app %q made %d versions in the last minute (GRAPHQL_PUBLISHES_PER_MINUTE); try again in %s",
			app, r.publishLimit, wait.Round(time.Second))
	}
	return func() { r.publishes.Refund(app) }, nil
}

// published ends a publishing mutation: replicas and caches are told, and
// the write counted.
func (r *resolvers) published(p gql.ResolveParams, t auth.Target) {
	r.changed(t.AppID, t.TokenID)
	executionOf(p.Context).wrote(p)
}

func (r *resolvers) setPublishing(p gql.ResolveParams) (any, error) {
	t, err := r.authorTarget(p, false, "publishing")
	if err != nil {
		return nil, err
	}
	on, _ := p.Args["on"].(bool)
	undo, err := r.mayPublish(t.AppID)
	if err != nil {
		return nil, err
	}
	before, err := r.store.Publishing(p.Context, t.AppID)
	if err != nil {
		undo()
		return nil, storeError(err)
	}
	pub, err := r.store.SetPublishing(auditedAs(p), t.AppID, on)
	if err != nil || !on || before.On {
		undo() // no version was made
	}
	if err != nil {
		return nil, storeError(err)
	}
	r.published(p, t)
	return publishingView(pub), nil
}

func (r *resolvers) publish(p gql.ResolveParams) (any, error) {
	t, err := r.authorTarget(p, false, "publishing")
	if err != nil {
		return nil, err
	}
	undo, err := r.mayPublish(t.AppID)
	if err != nil {
		return nil, err
	}
	v, published, err := r.store.Publish(auditedAs(p), t.AppID)
	if !published {
		undo()
	}
	if err != nil {
		return nil, publishError(err, t.AppID)
	}
	r.published(p, t)
	return map[string]any{"version": versionView(v), "published": published}, nil
}

func (r *resolvers) rollback(p gql.ResolveParams) (any, error) {
	t, err := r.authorTarget(p, false, "publishing")
	if err != nil {
		return nil, err
	}
	n, _ := p.Args["version"].(int)
	if n < 1 {
		return nil, errorf(CodeBadUserInput, "version", "version must be a version's number, from 1")
	}
	undo, err := r.mayPublish(t.AppID)
	if err != nil {
		return nil, err
	}
	v, err := r.store.Rollback(auditedAs(p), t.AppID, int64(n))
	if err != nil {
		undo()
		return nil, publishError(err, t.AppID)
	}
	r.published(p, t)
	return versionView(v), nil
}

// alsoPublished is write, a mutation of the record of kind its idArg
// names, followed, when its publish argument is true and the app
// publishes, by publishing that record alone, as the write left it (the
// record's whole draft: its other fields too). A publish that fails after
// the write says so, CONFLICT when the record changed in between: the
// write stays in the draft.
func (r *resolvers) alsoPublished(kind content.Kind, idArg string, write gql.FieldResolveFn) gql.FieldResolveFn {
	return func(p gql.ResolveParams) (any, error) {
		out, err := write(p)
		if err != nil || p.Args["publish"] != true {
			return out, err
		}
		t, err := r.target(p.Context, p.Args["appId"])
		if err != nil {
			return nil, err
		}
		id, _ := p.Args[idArg].(string)
		undo, err := r.mayPublish(t.AppID)
		if err != nil {
			return nil, errorf(CodeRateLimited, "publish", "the %s was written to the draft but not published: %v", kind, err)
		}
		var written []int64
		if rec, ok := out.(*record); ok {
			written = []int64{rec.rec.Revision}
		}
		_, published, err := r.store.PublishRecords(auditedAs(p), t.AppID, kind, []string{id}, written)
		if !published {
			undo()
		}
		switch {
		case errors.Is(err, content.ErrNotPublishing):
			// Its writes are live already.
		case errors.Is(err, content.ErrStale):
			return nil, errorf(CodeConflict, "publish", "the %s was written to the draft but not published: it changed since (%v); publish with publish", kind, err)
		case err != nil:
			e := publishError(err, t.AppID)
			return nil, errorf(CodeUnavailable, "publish", "the %s was written to the draft but not published: %v", kind, e)
		case published:
			r.changed(t.AppID, t.TokenID)
		}
		return out, nil
	}
}
