package deploy_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/assistantcms/cms/internal/localstack"
	"github.com/assistantcms/cms/pkg/operator/analyticspage"
	"github.com/assistantcms/cms/pkg/operator/gapinbox"
	"github.com/assistantcms/cms/pkg/pipeline/analyticsreport"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// checkAuthorsAnalytics reads the demo app's analytics and gap inbox as
// its authors do, through the gateway with a token holding events:read,
// once the traffic has settled: the report is the operator's, the inbox
// groups every wording the events say went unanswered, and the runtime
// token and no token are refused.
func checkAuthorsAnalytics(ctx context.Context, t *testing.T, st *localstack.Stack, operator string) {
	t.Helper()
	base := "http://" + st.Gateway
	for _, tc := range []struct {
		path, token string
		code        int
		says        string
	}{
		{gapinbox.Path, "", http.StatusUnauthorized, ""},
		{gapinbox.Path, st.Token, http.StatusForbidden, "events:read"},
		{analyticspage.AppDataPath, st.Token, http.StatusForbidden, "events:read"},
		{gapinbox.Path + "?lowConfidence=0.33", st.ManagementToken, http.StatusBadRequest, "lowConfidence"},
		{analyticspage.AppDataPath + "?days=0", st.ManagementToken, http.StatusBadRequest, "days"},
		{gapinbox.Path + "?appId=other-app", st.ManagementToken, http.StatusForbidden, ""},
		{analyticspage.ConversationPath + "?session=s1&appId=other-app", st.ManagementToken, http.StatusForbidden, ""},
		{analyticspage.SessionsPath, st.Token, http.StatusForbidden, "events:read"},
	} {
		if r := do(t, http.MethodGet, base+tc.path, tc.token, ""); r.code != tc.code || !strings.Contains(r.body, tc.says) {
			t.Errorf("GET %s: %d %s; want %d saying %q", tc.path, r.code, r.body, tc.code, tc.says)
		}
	}

	r := do(t, http.MethodGet, base+analyticspage.AppDataPath+"?days=30", st.ManagementToken, "")
	var mine analyticsreport.Report
	if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &mine) != nil {
		t.Fatalf("GET %s: %d %s", analyticspage.AppDataPath, r.code, r.body)
	}
	op := analyticsData(t, operator, "demo-app", 30)
	sameMean := (mine.Totals.MeanConfidence == nil) == (op.Totals.MeanConfidence == nil) &&
		(mine.Totals.MeanConfidence == nil || *mine.Totals.MeanConfidence == *op.Totals.MeanConfidence)
	mine.Totals.MeanConfidence, op.Totals.MeanConfidence = nil, nil
	if mine.AppID != "demo-app" || mine.Totals != op.Totals || !sameMean {
		t.Errorf("the authors' report of %s has totals %+v, the operator's %+v", mine.AppID, mine.Totals, op.Totals)
	}

	r = do(t, http.MethodGet, base+gapinbox.Path, st.ManagementToken, "")
	var in gapinbox.Inbox
	if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &in) != nil {
		t.Fatalf("GET %s: %d %s", gapinbox.Path, r.code, r.body)
	}
	listed := map[string]uint64{}
	for _, g := range in.Groups {
		if g.Representative != g.Wordings[0].Query || g.Users == 0 {
			t.Errorf("group %+v: its representative is not its first wording, or nobody asked", g)
		}
		for _, w := range g.Wordings {
			listed[w.Query] = w.Asked
		}
	}
	// Exactly the wordings the events hold of fallback turns, turns
	// matched below the default threshold and knowledge-base turns that
	// found nothing, each with its count, personal ones left out.
	s, err := chstore.Open(ctx, chstore.Config{Addrs: []string{st.ClickHouse}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := map[string]uint64{}
	for _, row := range rowsOf(ctx, t, s, "SELECT query_normalized AS q, uniqExact(event_id) AS n FROM events WHERE app_id = 'demo-app' "+
		"AND name = 'REQUEST_RESPONSE' AND query_normalized != '' AND event_time >= today() - 29 AND (request_type = 'INPUT_UNKNOWN_REQUEST' "+
		"OR (request_type = 'INTENT_REQUEST' AND intent_id = '') OR (kb_used = 1 AND kb_documents = 0 AND kb_faqs = 0) "+
		"OR ifNull(match_confidence, 1) < 0.5) GROUP BY q") {
		if !chschema.IsPrivate(row["q"]) {
			want[row["q"]] = uint64(atoi(t, row["n"]))
		}
	}
	if len(want) == 0 || !maps.Equal(listed, want) {
		t.Errorf("the inbox (%s, %d groups) lists %v\nthe events hold %v", in.GroupedBy, len(in.Groups), listed, want)
	}
	if in.GroupedBy != "meaning" || in.AppID != "demo-app" || len(in.Groups) > len(want) {
		t.Errorf("inbox of %s grouped by %s: %d groups of %d wordings; want demo-app by meaning", in.AppID, in.GroupedBy, len(in.Groups), len(want))
	}
	if !slices.IsSortedFunc(in.Groups, func(a, b gapinbox.Group) int { return int(b.Users) - int(a.Users) }) {
		t.Error("the groups are not ranked by the users they left without an answer")
	}
}
