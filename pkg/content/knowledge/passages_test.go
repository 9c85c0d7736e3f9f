package knowledge

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/embeddings"
)

func TestWordTokens(t *testing.T) {
	for _, tt := range []struct {
		text string
		want int
	}{
		{"", 0},
		{"   \n\t", 0},
		{"chain", 2},
		{"clean the chain", 6},
		{"£45, please.", 1 + 1 + 1 + 1 + 2 + 1}, // £ 4 5 , please .
		{"e-bike", 2 + 1 + 2},
		{"naïve café", 4},     // accented letters are letters
		{"we\u0301ll", 2},     // a combining mark stays in its word
		{"你好 世界", 4},          // a run of letters is a word, whatever the script
		{"😀😀", 2},             // symbols count one each
		{"Öhlins forks", 4},   // a capital with an accent too
		{"10 x 5", 2 + 2 + 1}, // digits count one each
	} {
		if got := wordTokens(tt.text); got != tt.want {
			t.Errorf("wordTokens(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

// words counts white-space separated words: a counter easy to reason about.
func words(s string) int { return len(strings.Fields(s)) }

// runes counts runes, so that a single word can be over a budget.
func runes(s string) int { return utf8.RuneCountInString(s) }

func TestSplitPassages(t *testing.T) {
	for _, tt := range []struct {
		name   string
		body   string
		count  func(string) int
		budget int
		want   []string
	}{
		{"empty", "", words, 10, nil},
		{"white space only", " \n\n \t\n\n", words, 10, nil},
		{"fits whole", "  One short paragraph.  ", words, 10, []string{"One short paragraph."}},
		{"paragraphs joined while they fit", "One two.\n\nThree four.\n\nFive six seven.", words, 4,
			[]string{"One two.\n\nThree four.", "Five six seven."}},
		{"blank paragraphs skipped", "One.\n\n\n\n  \n\nTwo.", words, 1, []string{"One.", "Two."}},
		{"long paragraph cut at sentence ends", "One two three. Four five! Six seven? Eight.", words, 3,
			[]string{"One two three.", "Four five!", "Six seven? Eight."}},
		{"a sentence over the budget cut at words", "one two three four five six seven", words, 3,
			[]string{"one two three", "four five six", "seven"}},
		{"a word over the budget cut at runes", "ab ééééé c", runes, 2,
			[]string{"ab", "éé", "éé", "é", "c"}},
		{"a decimal point is no sentence end", "It costs 1.5 pounds. Cheap.", words, 4,
			[]string{"It costs 1.5 pounds.", "Cheap."}},
		{"budget below one counts as one", "a b", words, 0, []string{"a", "b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range splitPassages(tt.body, tt.count, tt.budget) {
				got = append(got, tt.body[s.start:s.end])
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("splitPassages(%q, %d) = %q, want %q", tt.body, tt.budget, got, tt.want)
			}
		})
	}
}

// TestSplitPassagesHold: on every document of the evaluation corpus, and
// on texts of odd shapes, at several budgets, passages are within the
// budget, in order, trimmed, whole UTF-8, and together hold every word of
// the body; cutting again gives the same passages.
func TestSplitPassagesHold(t *testing.T) {
	var bodies []string
	for _, r := range evalRecords(t)[content.KindDocument] {
		var f docFields
		if err := json.Unmarshal(r.Doc, &f); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, f.Document)
	}
	bodies = append(bodies, strings.Repeat("x", 1000), strings.Repeat("é", 300)+" end.", "a\n\nb\n\n\n\nc", "\n\n", "Über. Ça va? Ja!",
		strings.Repeat("word ", 500), "no end", "trailing space.  \n\n  ")
	for _, c := range []struct {
		name   string
		count  func(string) int
		budget int
	}{{"estimate at the default window", wordTokens, defaultWindow}, {"runes", runes, 40}, {"words", words, 5}, {"runes, tiny", runes, 1}} {
		for _, body := range bodies {
			ps := splitPassages(body, c.count, c.budget)
			last := 0
			var kept strings.Builder
			for _, p := range ps {
				text := body[p.start:p.end]
				switch {
				case p.start < last || p.end <= p.start:
					t.Fatalf("%s: passage [%d, %d) after %d in %.60q", c.name, p.start, p.end, last, body)
				case c.count(text) > c.budget:
					t.Fatalf("%s: passage of %d over the budget %d: %.60q", c.name, c.count(text), c.budget, text)
				case text != strings.TrimSpace(text) || !utf8.ValidString(text):
					t.Fatalf("%s: passage not trimmed or not whole UTF-8: %q", c.name, text)
				}
				if gap := body[last:p.start]; strings.TrimFunc(gap, unicode.IsSpace) != "" {
					t.Fatalf("%s: text left out between passages: %q", c.name, gap)
				}
				kept.WriteString(text)
				last = p.end
			}
			if rest := body[last:]; strings.TrimSpace(rest) != "" {
				t.Fatalf("%s: text left out at the end: %.60q", c.name, rest)
			}
			if strings.Join(strings.Fields(kept.String()), "") != strings.Join(strings.Fields(body), "") {
				t.Fatalf("%s: passages do not hold the body's words: %.60q", c.name, body)
			}
			if again := splitPassages(body, c.count, c.budget); !slices.Equal(again, ps) {
				t.Fatalf("%s: cutting again gave other passages", c.name)
			}
		}
	}
}

// counting is an embedder stand-in with its own token counter.
type counting struct {
	embeddings.Embedder
	window int
}

func (c counting) Tokens(text string) int { return runes(text) }
func (c counting) Window() int            { return c.window }

type plainEmbedder struct{}

func (plainEmbedder) Embed(context.Context, []string) ([][]float32, error) { return nil, nil }
func (plainEmbedder) Model() string                                        { return "m" }

func TestTokenCounter(t *testing.T) {
	own := counting{Embedder: plainEmbedder{}, window: 7}
	for _, tt := range []struct {
		name   string
		emb    Embedder
		window int
		runes  bool // counts runes (the embedder's counter), not the estimate
	}{
		{"the embedder's own", own, 7, true},
		{"behind a cache", embeddings.Cached{Cache: embeddings.NewCache(0), Embedder: own}, 7, true},
		{"none: the estimate", plainEmbedder{}, defaultWindow, false},
		{"a cache of one without: the estimate", embeddings.Cached{Cache: embeddings.NewCache(0), Embedder: plainEmbedder{}}, defaultWindow, false},
		{"a window of zero is no window: the estimate", counting{Embedder: plainEmbedder{}}, defaultWindow, false},
	} {
		tc := tokenCounter(tt.emb)
		want := wordTokens("hello world")
		if tt.runes {
			want = runes("hello world")
		}
		if tc.Window() != tt.window || tc.Tokens("hello world") != want {
			t.Errorf("%s: window %d, %d tokens; want %d, %d", tt.name, tc.Window(), tc.Tokens("hello world"), tt.window, want)
		}
	}
}
