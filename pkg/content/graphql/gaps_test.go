package graphql

import (
	"strings"
	"testing"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// TestGapActions: an author adds a group's wordings to an FAQ or an
// intent, writes an FAQ for it or dismisses it, through the same checks
// as other writes; each is a decision the app keeps, audited.
func TestGapActions(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	e.addToken("runtime", tenancy.RuntimeScopes)
	e.addToken("reader", tenancy.ContentRead|tenancy.EventsRead)
	if _, err := e.store.CreateRecord(contenttest.Acting(t.Context()), content.Record{AppID: "app-1", Kind: content.KindFAQ, ID: "skate",
		Doc: []byte(`{"answer":"We do.","id":"skate","questions":["Do you sell skateboards?"]}`)}); err != nil {
		t.Fatal(err)
	}
	add := `mutation($faq: ID, $intent: ID, $w: [String!]!, $rev: Revision) { addGapWordings(groupId: "g1", wordings: $w, users: 4, faqId: $faq, intentId: $intent, ifRevision: $rev) {
		kind id revision added decision { groupId state users wordings } } }`
	for _, tc := range []struct {
		name, token string
		vars        map[string]any
		want        string
	}{
		{"a runtime token", "runtime", map[string]any{"faq": "skate", "w": []string{"x"}}, "MUTATION_NOT_ALLOWED@|INSUFFICIENT_SCOPE@"},
		{"a token without content:write", "reader", map[string]any{"faq": "skate", "w": []string{"x"}}, "MUTATION_NOT_ALLOWED@|INSUFFICIENT_SCOPE@"},
		{"neither record", "app1", map[string]any{"w": []string{"x"}}, "BAD_USER_INPUT@faqId"},
		{"both records", "app1", map[string]any{"faq": "skate", "intent": "OrderStatus", "w": []string{"x"}}, "BAD_USER_INPUT@faqId"},
		{"no wordings", "app1", map[string]any{"faq": "skate", "w": []string{}}, "BAD_USER_INPUT@wordings"},
		{"a slot's braces in an intent", "app1", map[string]any{"intent": "OrderStatus", "w": []string{"where is {order}"}}, "BAD_USER_INPUT@wordings[0]"},
		{"no such FAQ", "app1", map[string]any{"faq": "nope", "w": []string{"x"}}, "NOT_FOUND@faqId"},
		{"a stale revision", "app1", map[string]any{"faq": "skate", "w": []string{"x"}, "rev": 1}, "CONFLICT@ifRevision"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.post(tc.token, add, tc.vars)
			if got := strings.Join(a.codes(), ","); !strings.Contains("|"+tc.want+"|", "|"+got+"|") {
				t.Errorf("codes %s, want %s: %.300s", got, tc.want, a.raw)
			}
		})
	}
	if got, _ := e.store.GapDecisions(t.Context(), "app-1"); len(got) != 0 {
		t.Fatalf("refused actions decided %+v", got)
	}

	a := e.post("app1", add, map[string]any{"faq": "skate", "w": []string{"do you sell  SKATEBOARDS?", "skateboards available?", "can i buy a skateboard here"}})
	if len(a.Errors) > 0 {
		t.Fatal(a.raw)
	}
	got := jsonOf(a.Data["addGapWordings"])
	if !strings.Contains(got, `"added":["skateboards available?","can i buy a skateboard here"]`) || !strings.Contains(got, `"state":"resolved"`) ||
		!strings.Contains(got, `"kind":"faq"`) || !strings.Contains(got, `"users":4`) {
		t.Errorf("addGapWordings: %s", got)
	}
	rec, err := e.store.Record(t.Context(), "app-1", content.KindFAQ, "skate")
	if err != nil || !strings.Contains(string(rec.Doc), `"questions":["Do you sell skateboards?","skateboards available?","can i buy a skateboard here"]`) {
		t.Errorf("the FAQ: %s, %v", rec.Doc, err)
	}

	a = e.post("app1", `mutation { addGapWordings(groupId: "g2", wordings: ["track my parcel"], users: 2, intentId: "OrderStatus") { added decision { state } } }`, nil)
	if len(a.Errors) > 0 || jsonOf(a.Data) != `{"addGapWordings":{"added":["track my parcel"],"decision":{"state":"resolved"}}}` {
		t.Errorf("to an intent: %s", a.raw)
	}

	create := `mutation { createFaqFromGap(groupId: "g3", wordings: ["opening hours", "when are you open"], users: 9,
		faq: {id: "hours", question: "When are you open?", answer: "Nine to five."}) { kind id added } }`
	if a := e.post("app1", create, nil); len(a.Errors) > 0 || jsonOf(a.Data) != `{"createFaqFromGap":{"added":["When are you open?","opening hours","when are you open"],"id":"hours","kind":"faq"}}` {
		t.Errorf("createFaqFromGap: %s", a.raw)
	}
	if a := e.post("app1", create, nil); strings.Join(a.codes(), ",") != "ALREADY_EXISTS@faq.id" {
		t.Errorf("createFaqFromGap again: %s", a.raw)
	}

	dismiss := `mutation($r: String!) { dismissGap(groupId: "g4", wordings: ["buy crypto"], users: 3, reason: $r) { state reason users } }`
	if a := e.post("app1", dismiss, map[string]any{"r": ""}); strings.Join(a.codes(), ",") != "BAD_USER_INPUT@reason" {
		t.Errorf("dismissed without a reason: %s", a.raw)
	}
	if a := e.post("app1", dismiss, map[string]any{"r": "spam"}); jsonOf(a.Data) != `{"dismissGap":{"reason":"spam","state":"dismissed","users":3}}` {
		t.Errorf("dismissGap: %s", a.raw)
	}

	a = e.post("app1", `{ gapDecisions { groupId state } gapSettings { lowConfidence regrowFactor } }`, nil)
	if jsonOf(a.Data) != `{"gapDecisions":[{"groupId":"g4","state":"dismissed"},{"groupId":"g3","state":"resolved"},{"groupId":"g2","state":"resolved"},{"groupId":"g1","state":"resolved"}],`+
		`"gapSettings":{"lowConfidence":0.5,"regrowFactor":2}}` {
		t.Errorf("decisions and settings: %s", a.raw)
	}
	if a := e.post("reader", `{ gapDecisions { groupId } }`, nil); strings.Join(a.codes(), ",") != "INSUFFICIENT_SCOPE@" {
		t.Errorf("decisions read without content:write: %s", a.raw)
	}

	if a := e.post("app1", `mutation { setGapSettings(lowConfidence: 0.33) { lowConfidence } }`, nil); strings.Join(a.codes(), ",") != "BAD_USER_INPUT@lowConfidence" {
		t.Errorf("a threshold between bands: %s", a.raw)
	}
	if a := e.post("app1", `mutation { setGapSettings(lowConfidence: 0.7, regrowFactor: 3) { lowConfidence regrowFactor } }`, nil); jsonOf(a.Data) != `{"setGapSettings":{"lowConfidence":0.7,"regrowFactor":3}}` {
		t.Errorf("setGapSettings: %s", a.raw)
	}

	if a := e.post("app1", `mutation { reopenGap(groupId: "g4") }`, nil); jsonOf(a.Data) != `{"reopenGap":true}` {
		t.Errorf("reopenGap: %s", a.raw)
	}
	if a := e.post("app1", `mutation { reopenGap(groupId: "g4") }`, nil); strings.Join(a.codes(), ",") != "NOT_FOUND@groupId" {
		t.Errorf("reopenGap again: %s", a.raw)
	}

	log, err := e.store.AuditLog(t.Context(), content.AuditFilter{AppID: "app-1", Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, en := range log {
		ops = append(ops, en.Operation+" "+en.Subject)
	}
	for _, want := range []string{"addGapWordings faq/skate", "resolveGap gap/g1", "addGapWordings intent/OrderStatus", "createFaqFromGap faq/hours",
		"dismissGap gap/g4", "setGapSettings gapSettings", "reopenGap gap/g4"} {
		if !strings.Contains(strings.Join(ops, "|"), want) {
			t.Errorf("the audit log lacks %q: %v", want, ops)
		}
	}
}
