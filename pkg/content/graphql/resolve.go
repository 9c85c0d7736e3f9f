package graphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	gql "github.com/graphql-go/graphql"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/ratelimit"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// Store is what GraphQL reads and writes.
type Store interface {
	Record(ctx context.Context, appID string, kind content.Kind, id string) (content.Record, error)
	ListRecords(ctx context.Context, appID string, kind content.Kind) ([]content.Record, error)
	// The live version of an app that publishes, which tokens that do not
	// read drafts read.
	Live(ctx context.Context, app string) (revision, version int64, err error)
	content.VersionReader
	CreateRecord(ctx context.Context, r content.Record) (content.Record, error)
	UpdateRecord(ctx context.Context, appID string, kind content.Kind, id string, ifRevision int64, change func(content.Record) (content.Record, error)) (content.Record, error)
	DeleteRecord(ctx context.Context, appID string, kind content.Kind, id string, ifRevision int64) (content.Record, error)
	HistoryStore
	GapStore
	PublishStore
	WebhookStore
}

// AppResolver decides which app a request acts for, as REST does.
type AppResolver interface {
	Resolve(ctx context.Context, p auth.Principal, appIDParam string) (auth.Target, error)
}

type principalKey struct{}

// withPrincipal gives resolvers the authenticated caller.
func withPrincipal(ctx context.Context, p auth.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// resolvers carry what the field resolvers need.
type resolvers struct {
	store Store
	apps  AppResolver
	// changed is told of each change of an app's content, and by which
	// token.
	changed func(appID, tokenID string)
	// webhookAllow are the networks webhook URLs may reach though not
	// public; queued is told when a delivery was queued again.
	webhookAllow []netip.Prefix
	queued       func()
	// publishes bounds the versions an app makes, publishLimit a minute.
	publishes    *ratelimit.Limiter
	publishLimit int
}

// delivered tells that a delivery was queued again.
func (r *resolvers) delivered() {
	if r.queued != nil {
		r.queued()
	}
}

// target resolves the app named by the appId argument (optional with an
// app token).
func (r *resolvers) target(ctx context.Context, appID any) (auth.Target, error) {
	p, ok := ctx.Value(principalKey{}).(auth.Principal)
	if !ok {
		return auth.Target{}, errorf(CodeUnauthenticated, "", "Unauthorized")
	}
	id, _ := appID.(string)
	t, err := r.apps.Resolve(ctx, p, id)
	if err != nil {
		return auth.Target{}, fromAuth(err)
	}
	return t, nil
}

// authorTarget charges an authors' field (publishing, webhooks), resolves
// the app and requires content:write; what names the field's kind for
// the refusal.
func (r *resolvers) authorTarget(p gql.ResolveParams, list bool, what string) (auth.Target, error) {
	x := executionOf(p.Context)
	charge := x.chargeObjects(p, 1, keySize(p))
	if list {
		charge = x.charge(p, 0, keySize(p)+2)
	}
	if charge != nil {
		return auth.Target{}, charge
	}
	pr, _ := p.Context.Value(principalKey{}).(auth.Principal)
	if err := pr.Require(tenancy.ContentWrite, what); err != nil {
		return auth.Target{}, fromAuth(err)
	}
	return r.target(p.Context, p.Args["appId"])
}

// storeError passes on the errors a change reported (unwrapped, so that
// their codes reach the answer) and hides the store's own.
func storeError(err error) error {
	var ce *codedError
	var ps problems
	switch {
	case errors.As(err, &ps):
		return ps
	case errors.As(err, &ce):
		return ce
	}
	return errorf(CodeUnavailable, "", "the content store is unavailable; try again later")
}

// storedDoc decodes a record's document, its numbers as written.
func storedDoc(rec content.Record) (map[string]any, error) {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(rec.Doc))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// view is a record as the output types read it: the stored fields, the
// server-managed ones and maps turned into lists. The whole document is
// served from the stored JSON (record.value).
func view(kind content.Kind, rec content.Record, orgID string) (map[string]any, error) {
	v, err := storedDoc(rec)
	if err != nil {
		return nil, fmt.Errorf("stored %s %q is not a JSON object: %w", kind, rec.ID, err)
	}
	for k, val := range map[string]any{
		"appId": rec.AppID, "organizationId": orgID,
		"createdAt": rec.CreatedAt.UTC().Format(content.TimeLayout), "updatedAt": rec.UpdatedAt.UTC().Format(content.TimeLayout),
	} {
		v[k] = val
	}
	switch kind {
	case content.KindIntent, content.KindHandler:
		v["utterancePatterns"] = orEmpty(v["utterancePatterns"])
		v["slots"] = orEmpty(v["slots"])
		if kind == content.KindHandler {
			v["content"] = entries(v["content"], "handlerResponse")
			v["forward"] = entries(v["forward"], "paths")
			v["redirect"] = entries(v["redirect"], "paths")
		}
	case content.KindEntity:
		values := orEmpty(v["values"])
		out := make([]any, 0, len(values))
		for _, val := range values {
			if m, ok := val.(map[string]any); ok {
				m["synonyms"] = orEmpty(m["synonyms"])
				out = append(out, m)
			}
		}
		v["values"] = out
	}
	return v, nil
}

func orEmpty(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{}
}

// entries turns a map of lists into [{key, <name>: list}] ordered by key.
func entries(v any, name string) []any {
	m, _ := v.(map[string]any)
	keys := slices.Sorted(maps.Keys(m))
	out := make([]any, 0, len(keys))
	for _, k := range keys {
		out = append(out, map[string]any{"key": k, name: orEmpty(m[k])})
	}
	return out
}

// docFields turns a mutation input into record fields: lists of entries
// become maps, extra is merged in. A nil value means "remove the field".
func docFields(kind content.Kind, in map[string]any, arg string) (map[string]any, error) {
	out := map[string]any{}
	var errs problems
	for k, v := range in {
		switch k {
		case "extra":
			continue
		case "content", "forward", "redirect":
			if v == nil {
				out[k] = nil
				continue
			}
			name := "paths"
			if k == "content" {
				name = "handlerResponse"
			}
			m := map[string]any{}
			for i, e := range v.([]any) {
				entry := e.(map[string]any)
				key := entry["key"].(string)
				if _, dup := m[key]; dup {
					errs = append(errs, errorf(CodeBadUserInput, fmt.Sprintf("%s.%s[%d].key", arg, k, i), "%s.%s[%d].key: %q appears twice", arg, k, i, key))
				}
				m[key] = entry[name]
			}
			out[k] = m
		case "values":
			if v == nil {
				out[k] = nil
				continue
			}
			vals := make([]any, 0, len(v.([]any)))
			for i, e := range v.([]any) {
				val, err := withExtra(e.(map[string]any), fmt.Sprintf("%s.values[%d]", arg, i))
				if err != nil {
					errs = append(errs, err)
				}
				vals = append(vals, val)
			}
			out[k] = vals
		default:
			out[k] = v
		}
	}
	if extra, present := in["extra"]; present && extra != nil {
		m, ok := extra.(map[string]any)
		if !ok {
			errs = append(errs, errorf(CodeBadUserInput, arg+".extra", "%s.extra: must be a JSON object", arg))
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if _, typed := in[k]; typed || content.IsServerField(k) || k == kind.IDField() || k == "extra" {
				errs = append(errs, errorf(CodeBadUserInput, arg+".extra."+k, "%s.extra.%s: set this field directly, not through extra", arg, k))
				continue
			}
			out[k] = m[k]
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// withExtra merges a nested input's extra object into it.
func withExtra(in map[string]any, path string) (map[string]any, *codedError) {
	out := map[string]any{}
	for k, v := range in {
		if k != "extra" && v != nil {
			out[k] = v
		}
	}
	if extra, ok := in["extra"].(map[string]any); ok {
		for k, v := range extra {
			if _, typed := in[k]; typed {
				return out, errorf(CodeBadUserInput, path+".extra."+k, "%s.extra.%s: set this field directly, not through extra", path, k)
			}
			out[k] = v
		}
	} else if in["extra"] != nil {
		return out, errorf(CodeBadUserInput, path+".extra", "%s.extra: must be a JSON object", path)
	}
	return out, nil
}

// checked validates a record document and the entities its slots name.
func (r *resolvers) checked(ctx context.Context, kind content.Kind, doc map[string]any, appID, arg string) (content.Record, error) {
	rec, ps := content.ParseRecord(kind, doc, appID, "")
	if len(ps) > 0 {
		return content.Record{}, fromProblems(arg, ps)
	}
	if kind != content.KindIntent && kind != content.KindHandler {
		return rec, nil
	}
	var errs problems
	for i, s := range orEmpty(doc["slots"]) {
		t, _ := s.(map[string]any)["type"].(string)
		if content.IsBuiltinSlotType(t) {
			continue
		}
		_, err := r.store.Record(ctx, appID, content.KindEntity, t)
		switch {
		case errors.Is(err, content.ErrNotFound):
			field := fmt.Sprintf("%s.slots[%d].type", arg, i)
			errs = append(errs, errorf(CodeMissingReference, field,
				"%s: %q is neither an entity of app %q nor a built-in slot type", field, t, appID))
		case err != nil:
			return content.Record{}, storeError(err)
		}
	}
	if len(errs) > 0 {
		return content.Record{}, errs
	}
	return rec, nil
}

// reader is what the request reads of t's app: its draft, for a token
// that reads drafts (tenancy.Scopes.ReadsDraft) or of an app that does
// not publish, else its live version.
func (r *resolvers) reader(ctx context.Context, x *execution, t auth.Target) (content.RecordReader, error) {
	if t.Scopes.ReadsDraft() {
		return r.store, nil
	}
	live, ok := x.live(t.AppID)
	if !ok {
		_, v, err := r.store.Live(ctx, t.AppID)
		if err != nil {
			return nil, err
		}
		live = v
		x.keepLive(t.AppID, live)
	}
	return content.AtVersion(r.store, r.store, live), nil
}

// Field resolvers, built per kind.

// get reads one record, once per request however many fields select it.
func (r *resolvers) get(kind content.Kind, idArg string) gql.FieldResolveFn {
	return func(p gql.ResolveParams) (any, error) {
		// The field was charged with the root; its bytes are charged
		// here, and the record's fields once it is found.
		x := executionOf(p.Context)
		if err := x.charge(p, 0, keySize(p)); err != nil {
			return nil, err
		}
		t, err := r.target(p.Context, p.Args["appId"])
		if err != nil {
			return nil, err
		}
		id := p.Args[idArg].(string)
		if !auth.PossibleID(id) {
			// No record can have it; PostgreSQL would refuse the query.
			return nil, nil
		}
		key := recordKey{kind: kind, app: t.AppID, id: id}
		rec, ok := x.record(key)
		if !ok {
			rd, err := r.reader(p.Context, x, t)
			if err != nil {
				return nil, storeError(err)
			}
			stored, err := rd.Record(p.Context, t.AppID, kind, id)
			switch {
			case errors.Is(err, content.ErrNotFound):
			case err != nil:
				return nil, storeError(err)
			default:
				rec = newRecord(kind, stored, t.OrganizationID)
			}
			x.keepRecord(key, rec)
		}
		if rec == nil {
			return nil, nil
		}
		if err := x.chargeObjects(p, 1, 0); err != nil {
			return nil, err
		}
		return rec, nil
	}
}

// list reads an app's records of a kind, once per request.
func (r *resolvers) list(kind content.Kind) gql.FieldResolveFn {
	return func(p gql.ResolveParams) (any, error) {
		// The field was charged with the root.
		x := executionOf(p.Context)
		if err := x.charge(p, 0, keySize(p)+2); err != nil {
			return nil, err
		}
		t, err := r.target(p.Context, p.Args["appId"])
		if err != nil {
			return nil, err
		}
		key := listKey{kind: kind, app: t.AppID}
		recs, ok := x.list(key)
		if !ok {
			rd, err := r.reader(p.Context, x, t)
			if err != nil {
				return nil, storeError(err)
			}
			stored, err := rd.ListRecords(p.Context, t.AppID, kind)
			if err != nil {
				return nil, storeError(err)
			}
			recs = make([]*record, 0, len(stored))
			for _, rec := range stored {
				recs = append(recs, newRecord(kind, rec, t.OrganizationID))
			}
			x.keepList(key, recs)
		}
		// The records' fields, before graphql-go builds them; braces and
		// a comma for each.
		if err := x.chargeObjects(p, len(recs), 3*int64(len(recs))); err != nil {
			return nil, err
		}
		out := make([]any, 0, len(recs))
		for _, rec := range recs {
			out = append(out, rec)
		}
		return out, nil
	}
}

// add creates a record from the input argument arg. The app comes from
// the appId argument, or from inside the input (as addEntity has it).
func (r *resolvers) add(kind content.Kind, arg string) gql.FieldResolveFn {
	return func(p gql.ResolveParams) (any, error) {
		// The field was charged with the root; the record it answers is
		// charged before anything is written, and refused if over.
		if err := executionOf(p.Context).chargeObjects(p, 1, keySize(p)); err != nil {
			return nil, err
		}
		in, _ := p.Args[arg].(map[string]any)
		appID := p.Args["appId"]
		if inner, ok := in["appId"]; ok {
			if appID != nil && appID != inner {
				return nil, errorf(CodeBadUserInput, arg+".appId", "%s.appId %v differs from the appId argument %v", arg, inner, appID)
			}
			appID = inner
			in = maps.Clone(in)
			delete(in, "appId")
		}
		t, err := r.target(p.Context, appID)
		if err != nil {
			return nil, err
		}
		doc, err := docFields(kind, in, arg)
		if err != nil {
			return nil, err
		}
		for k, v := range doc {
			if v == nil {
				delete(doc, k)
			}
		}
		rec, err := r.checked(p.Context, kind, doc, t.AppID, arg)
		if err != nil {
			return nil, err
		}
		rec, err = r.store.CreateRecord(auditedAs(p), rec)
		switch {
		case errors.Is(err, content.ErrConflict):
			f := arg + "." + kind.IDField()
			return nil, errorf(CodeAlreadyExists, f, "%s: app %q already has a %s %q", f, t.AppID, kind, rec.ID)
		case err != nil:
			return nil, storeError(err)
		}
		r.changed(t.AppID, t.TokenID)
		executionOf(p.Context).wrote(p)
		return newRecord(kind, rec, t.OrganizationID), nil
	}
}

// update applies the input argument arg to the record named by idArg;
// fields given replace the stored ones. fields, when not nil, builds the
// changes from the arguments instead.
func (r *resolvers) update(kind content.Kind, idArg, arg string, fields func(p gql.ResolveParams) (map[string]any, error)) gql.FieldResolveFn {
	return func(p gql.ResolveParams) (any, error) {
		// The field was charged with the root; the record it answers is
		// charged before anything is written, and refused if over.
		if err := executionOf(p.Context).chargeObjects(p, 1, keySize(p)); err != nil {
			return nil, err
		}
		t, err := r.target(p.Context, p.Args["appId"])
		if err != nil {
			return nil, err
		}
		var changes map[string]any
		if fields != nil {
			changes, err = fields(p)
		} else {
			in, _ := p.Args[arg].(map[string]any)
			changes, err = docFields(kind, in, arg)
		}
		if err != nil {
			return nil, err
		}
		id := p.Args[idArg].(string)
		if !auth.PossibleID(id) {
			return r.written(p, t, kind, idArg, id, content.Record{}, content.ErrNotFound)
		}
		rec, err := r.store.UpdateRecord(auditedAs(p), t.AppID, kind, id, ifRevision(p), func(cur content.Record) (content.Record, error) {
			doc, err := storedDoc(cur)
			if err != nil {
				return cur, err
			}
			for k, v := range changes {
				if v == nil {
					delete(doc, k)
				} else {
					doc[k] = v
				}
			}
			return r.checked(p.Context, kind, doc, t.AppID, arg)
		})
		return r.written(p, t, kind, idArg, id, rec, err)
	}
}

// written answers a write to an existing record: the record, or why not.
func (r *resolvers) written(p gql.ResolveParams, t auth.Target, kind content.Kind, idArg, id string, rec content.Record, err error) (any, error) {
	var stale *content.Stale
	switch {
	case errors.Is(err, content.ErrNotFound) && !auth.PossibleID(id):
		// Not echoed: it may be as long as the request.
		return nil, errorf(CodeNotFound, idArg, "app %q has no %s with this %s", t.AppID, kind, idArg)
	case errors.Is(err, content.ErrNotFound):
		return nil, errorf(CodeNotFound, idArg, "app %q has no %s %q", t.AppID, kind, id)
	case errors.As(err, &stale):
		e := errorf(CodeConflict, "ifRevision", "%s", stale.Error())
		e.current = stale.Current
		return nil, e
	case err != nil:
		return nil, storeError(err)
	}
	r.changed(t.AppID, t.TokenID)
	executionOf(p.Context).wrote(p)
	return newRecord(kind, rec, t.OrganizationID), nil
}

func (r *resolvers) remove(kind content.Kind, idArg string) gql.FieldResolveFn {
	return func(p gql.ResolveParams) (any, error) {
		// The field was charged with the root; the record it answers is
		// charged before anything is written, and refused if over.
		if err := executionOf(p.Context).chargeObjects(p, 1, keySize(p)); err != nil {
			return nil, err
		}
		t, err := r.target(p.Context, p.Args["appId"])
		if err != nil {
			return nil, err
		}
		id := p.Args[idArg].(string)
		if !auth.PossibleID(id) {
			return r.written(p, t, kind, idArg, id, content.Record{}, content.ErrNotFound)
		}
		rec, err := r.store.DeleteRecord(auditedAs(p), t.AppID, kind, id, ifRevision(p))
		return r.written(p, t, kind, idArg, id, rec, err)
	}
}

// newSchema builds the executable schema.
func newSchema(r *resolvers) (gql.Schema, error) {
	t, inputs := buildTypes()
	appArg := &gql.ArgumentConfig{Type: gql.ID, Description: "The app; may be left out with an app token."}
	args := func(extra gql.FieldConfigArgument) gql.FieldConfigArgument {
		a := gql.FieldConfigArgument{"appId": appArg}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	id := &gql.ArgumentConfig{Type: gql.NewNonNull(gql.ID)}
	// ifRevision makes a write conditional on the record's revision.
	ifRev := &gql.ArgumentConfig{Type: t.revision, Description: "The record's revision as last read; the write is refused with CONFLICT if the record changed since."}
	h := newHistoryTypes(t.json, t.revision)
	g := newGapTypes(t.revision)
	pt := newPublishTypes(t.revision, h)
	wt := newWebhookTypes(t.json)
	query := gql.NewObject(gql.ObjectConfig{Name: "Query", Fields: merge(merge(merge(merge(r.historyQueries(h, t.revision, args), r.gapQueries(g, args)), r.publishQueries(pt, args)), r.webhookQueries(wt, args)), gql.Fields{
		"intent":   {Type: t.intent, Args: args(gql.FieldConfigArgument{"intentId": id}), Resolve: r.get(content.KindIntent, "intentId")},
		"intents":  {Type: listOf(t.intent), Args: args(nil), Resolve: r.list(content.KindIntent)},
		"handler":  {Type: t.handler, Args: args(gql.FieldConfigArgument{"intentId": id}), Resolve: r.get(content.KindHandler, "intentId")},
		"handlers": {Type: listOf(t.handler), Args: args(nil), Resolve: r.list(content.KindHandler)},
		"entity":   {Type: t.entity, Args: args(gql.FieldConfigArgument{"entityId": id}), Resolve: r.get(content.KindEntity, "entityId")},
		"entities": {Type: listOf(t.entity), Args: args(nil), Resolve: r.list(content.KindEntity)},
	})})
	in := func(name string) *gql.ArgumentConfig { return &gql.ArgumentConfig{Type: gql.NewNonNull(inputs[name])} }
	values := &gql.ArgumentConfig{Type: listOf(inputs["EntityValueInput"])}
	mutation := gql.NewObject(gql.ObjectConfig{Name: "Mutation", Fields: merge(merge(merge(merge(r.historyMutations(h, t.revision, args), r.gapMutations(g, t.revision, args)), r.publishMutations(pt, args)), r.webhookMutations(wt, args)), gql.Fields{
		"addIntent":    {Type: nonNull(t.intent), Args: args(gql.FieldConfigArgument{"intent": in("AddIntentInput")}), Resolve: r.add(content.KindIntent, "intent")},
		"updateIntent": {Type: nonNull(t.intent), Args: args(gql.FieldConfigArgument{"intentId": id, "ifRevision": ifRev, "intent": in("UpdateIntentInput")}), Resolve: r.update(content.KindIntent, "intentId", "intent", nil)},
		"deleteIntent": {Type: nonNull(t.intent), Args: args(gql.FieldConfigArgument{"intentId": id, "ifRevision": ifRev}), Resolve: r.remove(content.KindIntent, "intentId")},
		"addHandler":   {Type: nonNull(t.handler), Args: args(gql.FieldConfigArgument{"handler": in("AddHandlerInput")}), Resolve: r.add(content.KindHandler, "handler")},
		"updateHandler": {Type: nonNull(t.handler), Args: args(gql.FieldConfigArgument{"handlerId": id, "ifRevision": ifRev, "handler": in("UpdateHandlerInput")}),
			Resolve: r.update(content.KindHandler, "handlerId", "handler", nil)},
		"deleteHandler": {Type: nonNull(t.handler), Args: args(gql.FieldConfigArgument{"handlerId": id, "ifRevision": ifRev}), Resolve: r.remove(content.KindHandler, "handlerId")},
		"addEntity": {Type: nonNull(t.entity), Args: gql.FieldConfigArgument{"entity": in("AddEntityInput")}, Resolve: r.add(content.KindEntity, "entity"),
			Description: "Creates an entity; its app is entity.appId (which an app token may leave out)."},
		"updateEntity": {Type: nonNull(t.entity), Args: args(gql.FieldConfigArgument{"entityId": id, "ifRevision": ifRev, "entity": in("UpdateEntityInput")}),
			Resolve: r.update(content.KindEntity, "entityId", "entity", nil)},
		"deleteEntity": {Type: nonNull(t.entity), Args: args(gql.FieldConfigArgument{"entityId": id, "ifRevision": ifRev}), Resolve: r.remove(content.KindEntity, "entityId")},
		"replaceEntityValues": {Type: nonNull(t.entity), Args: args(gql.FieldConfigArgument{"entityId": id, "ifRevision": ifRev, "values": values,
			"publish": {Type: gql.Boolean, Description: "Of an app that publishes: make the entity's new values live at once too, and nothing else of the draft."}}),
			Description: "Replaces all values of an entity at once, as a refresh from an external catalogue does; readers see the old values or the new ones, never a mix.",
			Resolve:     r.alsoPublished(content.KindEntity, "entityId", r.update(content.KindEntity, "entityId", "", replaceValues))},
	})})
	return gql.NewSchema(gql.SchemaConfig{Query: query, Mutation: mutation})
}

// auditedAs is the context of a mutation's write: the audit log names it
// after the mutation.
func auditedAs(p gql.ResolveParams) context.Context {
	return tenancy.WithOperation(p.Context, p.Info.FieldName)
}

// ifRevision is the revision a write is conditional on; zero for none.
func ifRevision(p gql.ResolveParams) int64 {
	n, _ := p.Args["ifRevision"].(int64)
	return n
}

// replaceValues is the change replaceEntityValues makes: all values.
func replaceValues(p gql.ResolveParams) (map[string]any, error) {
	list, _ := p.Args["values"].([]any)
	vals := make([]any, 0, len(list))
	var errs problems
	for i, e := range list {
		val, err := withExtra(e.(map[string]any), fmt.Sprintf("values[%d]", i))
		if err != nil {
			errs = append(errs, err)
		}
		vals = append(vals, val)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return map[string]any{"values": vals}, nil
}
