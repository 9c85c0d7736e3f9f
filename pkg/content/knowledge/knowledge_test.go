package knowledge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/search"
)

func rec(kind content.Kind, id, doc string) content.Record {
	return content.Record{Kind: kind, AppID: "a", ID: id, Doc: json.RawMessage(doc), CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func base(t *testing.T) *Base {
	t.Helper()
	b, err := Build(
		[]content.Record{
			rec(content.KindDocument, "chain", `{"title":"Chain care","uri":"u1","document":"Clean the chain weekly.\n\nReplace a chain once it has stretched 0.5 percent."}`),
			rec(content.KindDocument, "hours", `{"title":"Riverside hours","uri":"u2","location":"riverside","document":"Open at 8 am at weekends."}`),
		},
		[]content.Record{
			rec(content.KindFAQ, "returns", `{"name":"Returns","questions":["Can I return a bike?","How do returns work?"],"answer":"Within 30 days.","url":"f1"}`),
			rec(content.KindFAQ, "wash", `{"name":"Bike wash","questions":["Do you wash bikes?"],"answer":"Yes, for 10.","created":"2025-01-01"}`),
		},
		[]content.Record{
			rec(content.KindIntent, "Order", `{"utterancePatterns":["where is my order","track {orderNumber} please","${x}"]}`),
			rec(content.KindIntent, "Dup", `{"utterancePatterns":["Where is my order"]}`),
		},
	)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPlainPattern(t *testing.T) {
	for in, want := range map[string]string{
		"track order ${number}":  "track order",
		"{size} bikes for {who}": "bikes for",
		"${x}":                   "",
		"  hello   there ":       "hello there",
	} {
		if got := PlainPattern(in); got != want {
			t.Errorf("PlainPattern(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFAQs(t *testing.T) {
	b := base(t)
	res := b.FAQs("how do returns work", 10)
	if res.Total != 1 || res.FAQ[0].Name != "Returns" || res.FAQ[0].Created != "2026-01-02T03:04:05.000Z" || len(res.FAQ[0].Questions) != 2 {
		t.Errorf("FAQs %+v", res)
	}
	if res := b.FAQs("wash", 10); res.FAQ[0].Created != "2025-01-01" {
		t.Errorf("a FAQ's own created field wins: %+v", res)
	}
}

// TestFAQsTotal: total counts every matching FAQ, however few the limit
// lets through, and the limit keeps the best of the full ranking.
func TestFAQsTotal(t *testing.T) {
	b, qs := evalSet(t)
	for _, q := range qs {
		all := b.FAQs(q.Question, 1000)
		if all.Total != len(all.FAQ) {
			t.Fatalf("%q: total %d with %d FAQs answered and no limit reached", q.Question, all.Total, len(all.FAQ))
		}
		for _, limit := range []int{1, 3, 10} {
			got := b.FAQs(q.Question, limit)
			if got.Total != all.Total || len(got.FAQ) != min(limit, all.Total) {
				t.Fatalf("%q, limit %d: total %d and %d FAQs; want total %d", q.Question, limit, got.Total, len(got.FAQ), all.Total)
			}
			for i := range got.FAQ {
				if got.FAQ[i].Name != all.FAQ[i].Name || got.FAQ[i].Score != all.FAQ[i].Score {
					t.Fatalf("%q, limit %d: FAQ %d is %q, the full ranking's is %q", q.Question, limit, i, got.FAQ[i].Name, all.FAQ[i].Name)
				}
			}
		}
	}
	b = base(t)
	for _, tt := range []struct {
		question     string
		limit, total int
		answered     int
	}{
		{"bike", 1, 2, 1}, // both FAQs mention bikes
		{"bike", 10, 2, 2},
		{"how do returns work", 1, 1, 1},
		{"zebra", 10, 0, 0},
	} {
		res := b.FAQs(tt.question, tt.limit)
		if res.Total != tt.total || len(res.FAQ) != tt.answered || res.FAQ == nil {
			t.Errorf("FAQs(%q, %d): total %d, %d answered; want %d, %d", tt.question, tt.limit, res.Total, len(res.FAQ), tt.total, tt.answered)
		}
	}
}

func TestSearchShapes(t *testing.T) {
	b := base(t)
	res := b.Search("when should I replace a stretched chain", "")
	// Both paragraphs of the one document are passages; the better first.
	if len(res.Documents) != 1 || res.Documents[0].Title != "Chain care" || len(res.Suggested) != 2 || res.Suggested[1].MatchConfidence >= res.Suggested[0].MatchConfidence {
		t.Fatalf("result %+v", res)
	}
	s := res.Suggested[0]
	if s.Document.Document != "Replace a chain once it has stretched 0.5 percent." || s.TopAnswer != s.Document.Document {
		t.Errorf("suggested %+v", s)
	}
	top := 0
	for _, h := range res.Documents[0].Highlights {
		if h.TopAnswer {
			top++
		}
	}
	if top != 3 { // replace, chain, stretched in the best sentence
		t.Errorf("top-answer highlights %d: %+v", top, res.Documents[0].Highlights)
	}
	if res := b.Search("weekends", "downtown"); len(res.Documents) != 0 {
		t.Errorf("location filter: %+v", res.Documents)
	}
}

func TestSuggestMergeOrder(t *testing.T) {
	b := base(t)
	hist := History([]QueryCount{{"where is my order", 7}, {"where is the shop", 2}})
	all := map[string]bool{KindHistorical: true, KindFAQ: true, KindIntent: true}
	var got []string
	for _, s := range b.Suggest("where is", all, hist, 10) {
		got = append(got, s.Type+":"+s.Suggestion)
	}
	// HISTORICAL first; the intent pattern equal to a past query is not
	// repeated, nor is the second intent's pattern differing in case.
	if want := "HISTORICAL:where is my order|HISTORICAL:where is the shop"; strings.Join(got, "|") != want {
		t.Errorf("got %q, want %q", strings.Join(got, "|"), want)
	}
	got = nil
	for _, s := range b.Suggest("can i retrn", all, nil, 10) { // a typo: FAQ after exact matches, of which there are none
		got = append(got, s.Type+":"+s.Suggestion)
	}
	if strings.Join(got, "|") != "FAQ:Can I return a bike?" {
		t.Errorf("typo: %q", got)
	}
	if s := b.Suggest("track", map[string]bool{KindIntent: true}, nil, 1); len(s) != 1 || s[0].Suggestion != "track please" {
		t.Errorf("track: %+v", s)
	}
}

func TestAnswer(t *testing.T) {
	b := base(t)
	a, err := b.Answer(context.Background(), "can I return a bike", "", nil, 0.5)
	if err != nil || !a.HasAnswer || a.Result != "Within 30 days." || len(a.Sources) != 1 || a.Sources[0].URL != "f1" {
		t.Errorf("FAQ answer %+v %v", a, err)
	}
	a, _ = b.Answer(context.Background(), "replace stretched chain", "", nil, 0.5)
	if !a.HasAnswer || a.Result != "Replace a chain once it has stretched 0.5 percent." || a.Sources[0].URL != "u1" {
		t.Errorf("passage answer %+v", a)
	}
	a, _ = b.Answer(context.Background(), "quantum chromodynamics", "", nil, 0.5)
	if a.HasAnswer || len(a.Sources) != 0 {
		t.Errorf("no answer %+v", a)
	}
}

func TestOpenAIGenerator(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &got)
		_, _ = io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"Within 30 days [1]."}}]}`)
	}))
	defer srv.Close()
	gen := &OpenAI{BaseURL: srv.URL + "/v1/", Model: "m", APIKey: "k"}
	b := base(t)
	a, err := b.Answer(context.Background(), "can I return a bike", "", gen, 0.2)
	if err != nil || a.Result != "Within 30 days [1]." {
		t.Fatalf("answer %+v %v", a, err)
	}
	msgs := got["messages"].([]any)
	user := msgs[1].(map[string]any)["content"].(string)
	if got["model"] != "m" || got["temperature"] != 0.2 || !strings.Contains(user, "[1] Returns (f1)") || !strings.Contains(user, "Question: can I return a bike") {
		t.Errorf("request %v", got)
	}
	bad := &OpenAI{BaseURL: srv.URL + "/v1", Model: "m", APIKey: "wrong"}
	a, err = b.Answer(context.Background(), "can I return a bike", "", bad, 0.2)
	if err == nil || a.Result != "Within 30 days." || !a.HasAnswer {
		t.Errorf("failing generator: %+v %v", a, err)
	}
}

func TestUTF16Slice(t *testing.T) {
	const text = "Café 😀 ok" // é is one unit, the emoji two
	for _, tt := range []struct {
		start, end int
		want       string
	}{
		{0, 4, "Café"},
		{5, 7, "😀"},
		{8, 10, "ok"},
		{4, 10, "😀 ok"}, // trimmed
		{10, 10, ""},
		{0, 0, ""},
		{6, 8, ""},  // inside the emoji
		{8, 11, ""}, // past the end
		{-1, 2, ""},
		{3, 2, ""},
	} {
		if got := utf16Slice(text, search.Span{Start: tt.start, End: tt.end}); got != tt.want {
			t.Errorf("utf16Slice(%d, %d) = %q, want %q", tt.start, tt.end, got, tt.want)
		}
	}
}

func TestPriorityFollowsSuggestionKinds(t *testing.T) {
	for i, k := range SuggestionKinds() {
		if priority(k) != i {
			t.Errorf("priority(%s) = %d, want %d", k, priority(k), i)
		}
	}
}

// TestSuggestByMeaning: typed words that begin no text still reach the
// FAQ they are about, with the words that matched in bold; a past query
// the text begins stays first; an FAQ shows once however many of its
// questions match.
func TestSuggestByMeaning(t *testing.T) {
	b := base(t)
	all := map[string]bool{KindHistorical: true, KindFAQ: true, KindIntent: true}
	show := func(ss []Suggestion) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Type+":"+s.Suggestion)
		}
		return strings.Join(out, "|")
	}
	got := b.Suggest("my bike needs a wash bef", all, nil, 5)
	if show(got) != "FAQ:Do you wash bikes?" {
		t.Fatalf("by meaning: %q", show(got))
	}
	// "wash" matched: bold, in UTF-16 offsets ("bike", in most of these
	// few FAQs, is left out of the search).
	if want := []map[string]Bold{{"bold": {7, 11}}}; !reflect.DeepEqual(got[0].Format, want) {
		t.Errorf("bold of a match by meaning: %+v, want %+v", got[0].Format, want)
	}
	hist := History([]QueryCount{{"my bike needs a wash before the race", 3}})
	if got := show(b.Suggest("my bike needs a wash bef", all, hist, 5)); got != "HISTORICAL:my bike needs a wash before the race|FAQ:Do you wash bikes?" {
		t.Errorf("history first: %q", got)
	}
	// Both questions of the returns FAQ begin with words typed; one shows.
	if got := show(b.Suggest("return", map[string]bool{KindFAQ: true}, nil, 5)); strings.Count(got, "FAQ:") != 1 {
		t.Errorf("one FAQ, one suggestion: %q", got)
	}
	// Stop words alone say nothing: only texts they begin.
	if got := show(b.Suggest("do you ", all, nil, 5)); got != "FAQ:Do you wash bikes?" {
		t.Errorf("stop words: %q", got)
	}
}

// TestSuggestTyposWhenFewTexts: matches with one edit are looked for when
// the exact ones name fewer FAQs than asked for, however many questions
// of one FAQ match.
func TestSuggestTyposWhenFewTexts(t *testing.T) {
	b, err := Build(nil, []content.Record{
		rec(content.KindFAQ, "pay", `{"name":"Paying","questions":["payment by card","payment by cash","payment by cheque","payment in store","payment online","payment abroad"],"answer":"Yes."}`),
		rec(content.KindFAQ, "plan", `{"name":"Plans","questions":["paymnet plans"],"answer":"Monthly."}`),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := b.Suggest("payment", map[string]bool{KindFAQ: true}, nil, 5)
	if len(got) != 2 || got[1].Suggestion != "paymnet plans" {
		t.Errorf("got %+v, want one question of each FAQ, the typo last", got)
	}
}
