package contentdb

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/assistantcms/cms/internal/contenttest"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// TestGapDecisions: decisions are kept per group, replaced, listed newest
// first, reopened, audited, and refused without an actor or with what
// they may not hold; settings default and are set.
func TestGapDecisions(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			s := openDB(t, b.newDB(t))
			withApp(t, s)
			ctx := contenttest.Acting(t.Context())
			if _, err := s.DecideGap(t.Context(), content.GapDecision{AppID: "app", GroupID: "g1", State: content.GapResolved, Wordings: []string{"a"}}); !errors.Is(err, tenancy.ErrNoActor) {
				t.Errorf("a decision without an actor: %v", err)
			}
			first, err := s.DecideGap(ctx, content.GapDecision{AppID: "app", GroupID: "g1", State: content.GapDismissed, Reason: "spam", Wordings: []string{"buy cheap", "cheap buy"}, Users: 3})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.DecideGap(ctx, content.GapDecision{AppID: "app", GroupID: "g2", State: content.GapResolved, Wordings: []string{"opening hours"}, Users: 7}); err != nil {
				t.Fatal(err)
			}
			again, err := s.DecideGap(ctx, content.GapDecision{AppID: "app", GroupID: "g1", State: content.GapResolved, Wordings: []string{"buy cheap"}, Users: 4})
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.GapDecisions(t.Context(), "app")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0].GroupID != "g1" || got[0].State != content.GapResolved || got[0].Users != 4 || len(got[0].Wordings) != 1 ||
				got[0].AuditID != again.AuditID || again.AuditID <= first.AuditID || !got[0].DecidedAt.Equal(again.DecidedAt) || got[1].GroupID != "g2" {
				t.Errorf("decisions %+v", got)
			}
			log, err := s.AuditLog(t.Context(), content.AuditFilter{AppID: "app", Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			var ops []string
			for _, e := range log {
				ops = append(ops, e.Operation+" "+e.Subject)
			}
			if len(ops) < 3 || ops[0] != "resolveGap gap/g1" || ops[2] != "dismissGap gap/g1" {
				t.Errorf("audit log %v", ops)
			}
			if err := s.ReopenGap(ctx, "app", "g1"); err != nil {
				t.Fatal(err)
			}
			if err := s.ReopenGap(ctx, "app", "g1"); !errors.Is(err, content.ErrNotFound) {
				t.Errorf("reopened twice: %v", err)
			}
			if got, _ := s.GapDecisions(t.Context(), "app"); len(got) != 1 || got[0].GroupID != "g2" {
				t.Errorf("after reopening: %+v", got)
			}
			for _, bad := range []content.GapDecision{
				{AppID: "app", GroupID: "g3", State: content.GapDismissed, Wordings: []string{"x"}},           // no reason
				{AppID: "app", GroupID: "g3", State: "open", Wordings: []string{"x"}},                         // no such state
				{AppID: "app", GroupID: "g3", State: content.GapResolved},                                     // no wordings
				{AppID: "app", GroupID: "", State: content.GapResolved, Wordings: []string{"x"}},              // no group
				{AppID: "app", GroupID: "g3", State: content.GapResolved, Wordings: []string{"x"}, Users: -1}, // negative
			} {
				var ps GapProblems
				if _, err := s.DecideGap(ctx, bad); !errors.As(err, &ps) {
					t.Errorf("%+v: %v", bad, err)
				}
			}
			if _, err := s.DecideGap(ctx, content.GapDecision{AppID: "nope", GroupID: "g", State: content.GapResolved, Wordings: []string{"x"}}); !errors.Is(err, content.ErrNotFound) {
				t.Errorf("a decision for no app: %v", err)
			}

			// The bytes an app keeps are bounded: every inbox reads them.
			long := make([]string, content.MaxGapWordings)
			for i := range long {
				long[i] = fmt.Sprintf("%03d %s", i, strings.Repeat("x", content.MaxGapWordingBytes-4))
			}
			kept := 0
			for ; kept < 1000; kept++ {
				d := content.GapDecision{AppID: "app", GroupID: fmt.Sprint("big-", kept), State: content.GapResolved, Wordings: long}
				if err := s.CheckGapDecision(t.Context(), d); err != nil {
					if !errors.Is(err, content.ErrTooManyGapDecisions) {
						t.Fatal(err)
					}
					if _, err := s.DecideGap(ctx, d); !errors.Is(err, content.ErrTooManyGapDecisions) {
						t.Fatalf("a decision past the bound checked refused, then written: %v", err)
					}
					break
				}
				if _, err := s.DecideGap(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
			if want := content.MaxGapDecisionBytes / (content.MaxGapWordings * (content.MaxGapWordingBytes + 3)); kept != want {
				t.Errorf("%d decisions of %d bytes kept, want %d", kept, content.MaxGapWordings*content.MaxGapWordingBytes, want)
			}
			// Replacing one is no more.
			if _, err := s.DecideGap(ctx, content.GapDecision{AppID: "app", GroupID: "big-0", State: content.GapDismissed, Reason: "r", Wordings: long}); err != nil {
				t.Errorf("replacing a decision at the bound: %v", err)
			}

			if g, err := s.GapSettings(t.Context(), "app"); err != nil || g != content.DefaultGapSettings() {
				t.Errorf("default settings %+v, %v", g, err)
			}
			want := content.GapSettings{LowConfidence: 0.7, RegrowFactor: 3}
			if err := s.SetGapSettings(ctx, "app", want); err != nil {
				t.Fatal(err)
			}
			if g, err := s.GapSettings(t.Context(), "app"); err != nil || g != want {
				t.Errorf("settings %+v, %v; want %+v", g, err, want)
			}
			for _, bad := range []content.GapSettings{{LowConfidence: 0.33, RegrowFactor: 2}, {LowConfidence: 0.5, RegrowFactor: 1}, {LowConfidence: 0.95, RegrowFactor: 2}} {
				var ps GapProblems
				if err := s.SetGapSettings(ctx, "app", bad); !errors.As(err, &ps) {
					t.Errorf("%+v: %v", bad, err)
				}
			}
		})
	}
}
