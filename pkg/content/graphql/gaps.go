package graphql

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gql "github.com/graphql-go/graphql"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// GapStore keeps what authors decide about the groups of their app's gap
// inbox, and the inbox's settings.
type GapStore interface {
	DecideGap(ctx context.Context, d content.GapDecision) (content.GapDecision, error)
	CheckGapDecision(ctx context.Context, d content.GapDecision) error
	ReopenGap(ctx context.Context, app, group string) error
	GapDecisions(ctx context.Context, app string) ([]content.GapDecision, error)
	GapSettings(ctx context.Context, app string) (content.GapSettings, error)
	SetGapSettings(ctx context.Context, app string, s content.GapSettings) error
}

// gapTypes are the types of the gap fields.
type gapTypes struct {
	decision, action, settings *gql.Object
	faq                        *gql.InputObject
}

func newGapTypes(revision *gql.Scalar) gapTypes {
	str := nonNull(gql.String)
	decision := gql.NewObject(gql.ObjectConfig{Name: "GapDecision", Description: "What the app's authors decided about a group of its gap inbox.",
		Fields: metered(gql.Fields{
			"groupId":   field(nonNull(gql.ID), ""),
			"state":     field(str, "resolved or dismissed."),
			"reason":    field(str, "Why, for a dismissed group."),
			"wordings":  field(listOf(gql.String), "The group's wordings when decided."),
			"users":     field(nonNull(gql.Int), "The group's users when decided: a dismissed group opens again once it has the app's regrow factor times as many."),
			"decidedAt": field(str, "RFC 3339, UTC."),
			"auditId":   field(nonNull(gql.ID), "The decision's audit entry."),
		})})
	return gapTypes{
		decision: decision,
		action: gql.NewObject(gql.ObjectConfig{Name: "GapAction", Description: "A group resolved by a change of content: the decision, and the record written.",
			Fields: metered(gql.Fields{
				"decision": field(nonNull(decision), ""),
				"kind":     field(str, "faq or intent."),
				"id":       field(nonNull(gql.ID), "The record's ID (an FAQ's id, an intent's intentId)."),
				"revision": field(nonNull(revision), "The record's revision after the change."),
				"added":    field(listOf(gql.String), "The wordings the record did not have, and now has."),
			})}),
		settings: gql.NewObject(gql.ObjectConfig{Name: "GapSettings", Description: "The app's gap inbox settings.",
			Fields: metered(gql.Fields{
				"lowConfidence": field(nonNull(gql.Float), "Turns matched below this confidence are gaps (a multiple of 0.05 up to 0.9)."),
				"regrowFactor":  field(nonNull(gql.Float), "A dismissed group opens again at this many times its users when dismissed."),
			})}),
		faq: gql.NewInputObject(gql.InputObjectConfig{Name: "GapFaqInput", Description: "The FAQ createFaqFromGap writes.",
			Fields: gql.InputObjectConfigFieldMap{
				"id":       input(nonNull(gql.ID), ""),
				"name":     input(gql.String, ""),
				"question": input(nonNull(gql.String), "Its question, the group's representative as the author words it."),
				"answer":   input(nonNull(gql.String), ""),
				"url":      input(gql.String, ""),
			}}),
	}
}

func (r *resolvers) gapQueries(g gapTypes, args func(gql.FieldConfigArgument) gql.FieldConfigArgument) gql.Fields {
	return gql.Fields{
		"gapSettings": {Type: nonNull(g.settings), Description: "The app's gap inbox settings. Needs content:write.", Args: args(nil), Resolve: r.gapSettings},
		"gapDecisions": {Type: listOf(g.decision), Description: "What the app's authors decided about groups of its gap inbox, newest first. Needs content:write.",
			Args: args(nil), Resolve: r.gapDecisions},
	}
}

func (r *resolvers) gapMutations(g gapTypes, revision *gql.Scalar, args func(gql.FieldConfigArgument) gql.FieldConfigArgument) gql.Fields {
	group := func(extra gql.FieldConfigArgument) gql.FieldConfigArgument {
		a := args(extra)
		a["groupId"] = &gql.ArgumentConfig{Type: nonNull(gql.ID), Description: "The group's id in the gap inbox."}
		return a
	}
	seen := gql.FieldConfigArgument{
		"wordings": {Type: listOf(gql.String), Description: "The group's wordings, as the inbox listed them (at most 200)."},
		"users":    {Type: nonNull(gql.Int), Description: "The group's users, as the inbox counted them."},
	}
	with := func(more gql.FieldConfigArgument) gql.FieldConfigArgument {
		a := group(more)
		for k, v := range seen {
			a[k] = v
		}
		return a
	}
	return gql.Fields{
		"addGapWordings": {Type: nonNull(g.action),
			Description: "Adds a group's wordings to an FAQ's questions (faqId) or an intent's utterance patterns (intentId), those it lacks, and marks the group resolved.",
			Args: with(gql.FieldConfigArgument{"faqId": {Type: gql.ID}, "intentId": {Type: gql.ID},
				"ifRevision": {Type: revision, Description: "The record's revision as last read; refused with CONFLICT if it changed since."}}),
			Resolve: r.addGapWordings},
		"createFaqFromGap": {Type: nonNull(g.action), Description: "Writes a new FAQ for a group, its question and the group's other wordings as its questions, and marks the group resolved.",
			Args: with(gql.FieldConfigArgument{"faq": {Type: nonNull(g.faq)}}), Resolve: r.createFaqFromGap},
		"dismissGap": {Type: nonNull(g.decision), Description: "Dismisses a group, for a reason, until it grows by the app's regrow factor.",
			Args: with(gql.FieldConfigArgument{"reason": {Type: nonNull(gql.String)}}), Resolve: r.dismissGap},
		"reopenGap": {Type: nonNull(gql.Boolean), Description: "Forgets the decision on a group: it is open again.", Args: group(nil), Resolve: r.reopenGap},
		"setGapSettings": {Type: nonNull(g.settings), Description: "Sets the app's gap inbox settings; those left out keep their values.",
			Args: args(gql.FieldConfigArgument{"lowConfidence": {Type: gql.Float}, "regrowFactor": {Type: gql.Float}}), Resolve: r.setGapSettings},
	}
}

// gapTarget charges a gap field (a list's items are charged once read),
// resolves the app and requires content:write: decisions are the
// authors'.
func (r *resolvers) gapTarget(p gql.ResolveParams, list bool) (auth.Target, GapStore, error) {
	t, err := r.authorTarget(p, list, "the gap inbox")
	return t, r.store, err
}

func decisionView(d content.GapDecision) map[string]any {
	ws := make([]any, len(d.Wordings))
	for i, w := range d.Wordings {
		ws[i] = w
	}
	return map[string]any{"groupId": d.GroupID, "state": string(d.State), "reason": d.Reason, "wordings": ws, "users": int(d.Users),
		"decidedAt": d.DecidedAt.UTC().Format(content.TimeLayout), "auditId": fmt.Sprint(d.AuditID)}
}

func settingsView(s content.GapSettings) map[string]any {
	return map[string]any{"lowConfidence": s.LowConfidence, "regrowFactor": s.RegrowFactor}
}

func (r *resolvers) gapSettings(p gql.ResolveParams) (any, error) {
	t, gs, err := r.gapTarget(p, false)
	if err != nil {
		return nil, err
	}
	s, err := gs.GapSettings(p.Context, t.AppID)
	if err != nil {
		return nil, storeError(err)
	}
	return settingsView(s), nil
}

func (r *resolvers) gapDecisions(p gql.ResolveParams) (any, error) {
	t, gs, err := r.gapTarget(p, true)
	if err != nil {
		return nil, err
	}
	ds, err := gs.GapDecisions(p.Context, t.AppID)
	if err != nil {
		return nil, storeError(err)
	}
	return objects(p, ds, decisionView)
}

func (r *resolvers) setGapSettings(p gql.ResolveParams) (any, error) {
	t, gs, err := r.gapTarget(p, false)
	if err != nil {
		return nil, err
	}
	s, err := gs.GapSettings(p.Context, t.AppID)
	if err != nil {
		return nil, storeError(err)
	}
	if v, ok := p.Args["lowConfidence"].(float64); ok {
		s.LowConfidence = v
	}
	if v, ok := p.Args["regrowFactor"].(float64); ok {
		s.RegrowFactor = v
	}
	if ps := s.Check(); len(ps) > 0 {
		return nil, fromProblems("", ps)
	}
	if err := gs.SetGapSettings(auditedAs(p), t.AppID, s); err != nil {
		return nil, gapError(err)
	}
	executionOf(p.Context).wrote(p)
	return settingsView(s), nil
}

// seenGroup is the group a gap mutation names, as its arguments give it.
func seenGroup(p gql.ResolveParams, t auth.Target, state content.GapState) content.GapDecision {
	d := content.GapDecision{AppID: t.AppID, State: state}
	d.GroupID, _ = p.Args["groupId"].(string)
	d.Reason, _ = p.Args["reason"].(string)
	for _, w := range orEmpty(p.Args["wordings"]) {
		s, _ := w.(string)
		d.Wordings = append(d.Wordings, s)
	}
	users, _ := p.Args["users"].(int)
	d.Users = int64(users)
	return d
}

// gapError answers a decision's failure; what it holds was checked
// before.
func gapError(err error) error {
	if errors.Is(err, content.ErrTooManyGapDecisions) {
		return errorf(CodeBadUserInput, "groupId", "%s", content.ErrTooManyGapDecisions.Error())
	}
	return storeError(err)
}

// checkDecision refuses a decision the store would, before content is
// written for it: its content and the app's room for it.
func checkDecision(ctx context.Context, gs GapStore, d content.GapDecision) error {
	if ps := d.Check(); len(ps) > 0 {
		return fromProblems("", ps)
	}
	if err := gs.CheckGapDecision(ctx, d); err != nil {
		return gapError(err)
	}
	return nil
}

func (r *resolvers) dismissGap(p gql.ResolveParams) (any, error) {
	t, gs, err := r.gapTarget(p, false)
	if err != nil {
		return nil, err
	}
	d := seenGroup(p, t, content.GapDismissed)
	if err := checkDecision(p.Context, gs, d); err != nil {
		return nil, err
	}
	if d, err = gs.DecideGap(auditedAs(p), d); err != nil {
		return nil, gapError(err)
	}
	executionOf(p.Context).wrote(p)
	return decisionView(d), nil
}

func (r *resolvers) reopenGap(p gql.ResolveParams) (any, error) {
	t, gs, err := r.gapTarget(p, false)
	if err != nil {
		return nil, err
	}
	group, _ := p.Args["groupId"].(string)
	if err := gs.ReopenGap(auditedAs(p), t.AppID, group); err != nil {
		if errors.Is(err, content.ErrNotFound) {
			return nil, errorf(CodeNotFound, "groupId", "app %q has no decision on this group", t.AppID)
		}
		return nil, storeError(err)
	}
	executionOf(p.Context).wrote(p)
	return true, nil
}

// normalWording is a wording as the inbox compares them: lower case,
// single spaces.
func normalWording(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }

// appendNew appends to list the wordings it lacks, compared as the inbox
// normalises them, and returns them.
func appendNew(list []any, wordings []string) ([]any, []any) {
	have := map[string]bool{}
	for _, v := range list {
		if s, ok := v.(string); ok {
			have[normalWording(s)] = true
		}
	}
	var added []any
	for _, w := range wordings {
		if n := normalWording(w); n != "" && !have[n] {
			have[n] = true
			list = append(list, w)
			added = append(added, w)
		}
	}
	return list, added
}

func (r *resolvers) addGapWordings(p gql.ResolveParams) (any, error) {
	t, gs, err := r.gapTarget(p, false)
	if err != nil {
		return nil, err
	}
	d := seenGroup(p, t, content.GapResolved)
	if err := checkDecision(p.Context, gs, d); err != nil {
		return nil, err
	}
	faqID, toFAQ := p.Args["faqId"].(string)
	intentID, toIntent := p.Args["intentId"].(string)
	if toFAQ == toIntent {
		return nil, errorf(CodeBadUserInput, "faqId", "name either faqId or intentId: the record the wordings go to")
	}
	kind, id, idArg, list := content.KindFAQ, faqID, "faqId", "questions"
	if toIntent {
		kind, id, idArg, list = content.KindIntent, intentID, "intentId", "utterancePatterns"
		// An utterance pattern names slots in braces; a wording is what a
		// user typed, never a pattern.
		for i, w := range d.Wordings {
			if strings.ContainsAny(w, "{}") {
				return nil, errorf(CodeBadUserInput, fmt.Sprintf("wordings[%d]", i), "wordings[%d]: braces name slots in an utterance pattern; add it to the intent by hand", i)
			}
		}
	}
	if !auth.PossibleID(id) {
		return r.written(p, t, kind, idArg, id, content.Record{}, content.ErrNotFound)
	}
	var added []any
	rec, err := r.store.UpdateRecord(auditedAs(p), t.AppID, kind, id, ifRevision(p), func(cur content.Record) (content.Record, error) {
		doc, err := storedDoc(cur)
		if err != nil {
			return cur, err
		}
		var items []any
		items, added = appendNew(orEmpty(doc[list]), d.Wordings)
		doc[list] = items
		return r.checked(p.Context, kind, doc, t.AppID, idArg)
	})
	if _, err := r.written(p, t, kind, idArg, id, rec, err); err != nil {
		return nil, err
	}
	return r.resolved(p, gs, d, kind, rec, added)
}

// resolved records a group resolved by rec, and answers the action.
func (r *resolvers) resolved(p gql.ResolveParams, gs GapStore, d content.GapDecision, kind content.Kind, rec content.Record, added []any) (any, error) {
	d, err := gs.DecideGap(tenancy.WithOperation(p.Context, "resolveGap"), d)
	if err != nil {
		return nil, gapError(err)
	}
	if added == nil {
		added = []any{}
	}
	return map[string]any{"decision": decisionView(d), "kind": string(kind), "id": rec.ID, "revision": rec.Revision, "added": added}, nil
}

func (r *resolvers) createFaqFromGap(p gql.ResolveParams) (any, error) {
	t, gs, err := r.gapTarget(p, false)
	if err != nil {
		return nil, err
	}
	d := seenGroup(p, t, content.GapResolved)
	if err := checkDecision(p.Context, gs, d); err != nil {
		return nil, err
	}
	in, _ := p.Args["faq"].(map[string]any)
	question, _ := in["question"].(string)
	questions, _ := appendNew([]any{question}, d.Wordings)
	doc := map[string]any{"id": in["id"], "questions": questions, "answer": in["answer"]}
	for _, k := range []string{"name", "url"} {
		if v, ok := in[k]; ok && v != nil {
			doc[k] = v
		}
	}
	rec, err := r.checked(p.Context, content.KindFAQ, doc, t.AppID, "faq")
	if err != nil {
		return nil, err
	}
	rec, err = r.store.CreateRecord(auditedAs(p), rec)
	switch {
	case errors.Is(err, content.ErrConflict):
		return nil, errorf(CodeAlreadyExists, "faq.id", "faq.id: app %q already has a faq %q", t.AppID, rec.ID)
	case err != nil:
		return nil, storeError(err)
	}
	r.changed(t.AppID, t.TokenID)
	executionOf(p.Context).wrote(p)
	return r.resolved(p, gs, d, content.KindFAQ, rec, questions)
}
