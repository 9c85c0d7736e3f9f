package knowledge

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/assistantcms/cms/pkg/content"
)

func TestCut(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		n    int
		want string
		cut  bool
	}{
		{"short", "where is my order", 20, "where is my order", false},
		{"exactly the limit", "abcde", 5, "abcde", false},
		{"empty", "", 5, "", false},
		{"at a space", "where is my order", 8, "where is", true},
		{"inside a word", "where is my order", 10, "where is", true},
		{"inside the first word", "where is my order", 3, "whe", true},
		{"space too early", "a verylongwordindeed", 10, "a verylong", true},
		{"no spaces", "abcdefghij", 4, "abcd", true},
		{"runes, not bytes", "éééé ééé", 6, "éééé", true},
		{"emoji", "😀😀😀😀", 2, "😀😀", true},
		{"CJK without spaces", "東京都の自転車店", 3, "東京都", true},
		{"combining mark stays with its letter", "cafe\u0301s", 4, "caf", true},
		{"joined emoji stay whole", "ab👨\u200d👩", 4, "ab", true},
		{"other white space", "line one\nline two", 11, "line one", true},
		{"trailing spaces dropped", "ab    cd", 5, "ab", true},
		{"zero", "abc", 0, "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := Cut(tt.in, tt.n)
			if got != tt.want || cut != tt.cut {
				t.Errorf("Cut(%q, %d) = %q, %v; want %q, %v", tt.in, tt.n, got, cut, tt.want, tt.cut)
			}
			if !strings.HasPrefix(tt.in, got) || !utf8.ValidString(got) || utf8.RuneCountInString(got) > max(tt.n, 0) {
				t.Errorf("Cut(%q, %d) = %q: not a valid start of at most %d runes", tt.in, tt.n, got, tt.n)
			}
		})
	}
}

func TestTruncateAnswer(t *testing.T) {
	words := strings.Repeat("Pedal ", 40) // 240 runes
	long := strings.Repeat("x", 400)
	for _, tt := range []struct {
		name, in, want string
	}{
		{"short answer unchanged", "Within 30 days.", "Within 30 days."},
		{"empty", "", ""},
		{"exactly the limit unchanged", strings.Repeat("a", TruncatedAnswerRunes), strings.Repeat("a", TruncatedAnswerRunes)},
		{"cut at a word", words, strings.TrimSpace(strings.Repeat("Pedal ", 25)) + "…"}, // 149 runes and the ellipsis
		{"cut inside a word", "Go " + words, "Go " + strings.TrimSpace(strings.Repeat("Pedal ", 24)) + "…"},
		{"one long word", long, strings.Repeat("x", TruncatedAnswerRunes-1) + "…"},
		{"punctuation before the ellipsis", strings.Repeat("a", 140) + " bcdefg, hijklmnop", strings.Repeat("a", 140) + " bcdefg…"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := truncateAnswer(tt.in)
			if got != tt.want {
				t.Errorf("truncateAnswer(%.20q…) = %q, want %q", tt.in, got, tt.want)
			}
			if n := utf8.RuneCountInString(got); n > TruncatedAnswerRunes {
				t.Errorf("%d runes, over %d", n, TruncatedAnswerRunes)
			}
		})
	}
}

// TestSuggestTruncatedAnswer: FAQ suggestions carry the answer and its
// truncation, and both survive JSON encoding whatever they hold.
func TestSuggestTruncatedAnswer(t *testing.T) {
	answer := `Yes: <b>"gift" cards</b> & vouchers` + "\u2028" + strings.Repeat(" from £10 to £500 😀", 10)
	b, err := Build(nil, []content.Record{
		rec(content.KindFAQ, "gift", `{"name":"Gift cards","questions":["Do you sell gift cards?"],"answer":`+mustJSON(t, answer)+`}`),
		rec(content.KindFAQ, "hours", `{"name":"Hours","questions":["Do you open on Sundays?"],"answer":"From 10 to 4."}`),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := b.Suggest("do you", map[string]bool{KindFAQ: true}, nil, 5)
	if len(got) != 2 {
		t.Fatalf("suggestions %+v", got)
	}
	byText := map[string]Suggestion{}
	for _, s := range got {
		byText[s.Suggestion] = s
	}
	gift, hours := byText["Do you sell gift cards?"], byText["Do you open on Sundays?"]
	if gift.Answer != answer || !strings.HasSuffix(gift.TruncatedAnswer, "…") || !strings.HasPrefix(gift.TruncatedAnswer, strings.TrimSuffix(gift.TruncatedAnswer, "…")) {
		t.Errorf("long answer: %+v", gift)
	}
	if hours.TruncatedAnswer != "From 10 to 4." {
		t.Errorf("short answer: %+v", hours)
	}
	raw, err := json.Marshal(gift)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"truncatedAnswer":"Yes: \u003cb\u003e\"gift\" cards\u003c/b\u003e \u0026 vouchers\u2028`) {
		t.Errorf("encoded %s", raw)
	}
	var back Suggestion
	if err := json.Unmarshal(raw, &back); err != nil || back.TruncatedAnswer != gift.TruncatedAnswer {
		t.Errorf("round trip %q, %v", back.TruncatedAnswer, err)
	}
	// Intent suggestions have no answer, so no truncation either.
	if s := base(t).Suggest("where", map[string]bool{KindIntent: true}, nil, 5); len(s) == 0 || s[0].TruncatedAnswer != "" {
		t.Errorf("intent suggestion %+v", s)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
