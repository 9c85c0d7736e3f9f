package lexicon

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

type rel struct {
	word string
	w    float64
}

func related(w *WordNet, word string) []rel {
	var out []rel
	w.Related(word, func(r string, weight float64) { out = append(out, rel{r, weight}) })
	return out
}

func TestRelatedTestdata(t *testing.T) {
	w, err := Load(filepath.Join("testdata", "wordnet"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		word string
		want []rel
	}{
		// Synonym, then hyponym (multi-word), then hypernym of the first sense.
		{"voucher", []rel{{"coupon", 1}, {"gift certificate", 0.3}, {"commercial document", 0.25}}},
		// Regular noun inflection; the irregular plural of a synonym follows it;
		// an untagged second sense of a lemma with tagged senses is scaled down.
		{"kids", []rel{{"child", 1}, {"children", 1}, {"kidskin", 0.8 * untaggedScale}}},
		{"children", []rel{{"child", 1}, {"kid", 1}}},
		// Senses by rank; the fourth, untagged sense ("breed") is left out.
		{"nicked", []rel{{"snick", 1}, {"chip", 0.8}, {"cut", 0.25}}},
		// An irregular form yields its lemma, not its sibling "stole".
		{"stolen", []rel{{"steal", 1}, {"stealer", 0.5}}},
		// A lemma's own irregular inflections are not related words.
		{"steal", []rel{{"stealer", 0.5}}},
		// Derivation is lexical: only "stealer" points at "steal".
		{"thief", []rel{{"stealer", 1}}},
		{"stealer", []rel{{"thief", 1}, {"steal", 0.5}, {"stole", 0.5}, {"stolen", 0.5}}},
		// Adjective marker "(p)" stripped; similar-to and its inflection.
		{"happy", []rel{{"glad", 0.6}, {"gladder", 0.6}}},
		{"gladder", []rel{{"glad", 1}, {"happy", 0.6}}},
		{"unknown", nil},
		{"", nil},
	}
	for _, tt := range tests {
		t.Run(tt.word, func(t *testing.T) {
			got := related(w, tt.word)
			if len(got) != len(tt.want) {
				t.Fatalf("Related(%q) = %v, want %v", tt.word, got, tt.want)
			}
			for i := range got {
				if got[i].word != tt.want[i].word || !near(got[i].w, tt.want[i].w) {
					t.Fatalf("Related(%q) = %v, want %v", tt.word, got, tt.want)
				}
			}
		})
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestLoadErrors(t *testing.T) {
	copyDB := func(t *testing.T, edit func(dir string)) string {
		t.Helper()
		dir := t.TempDir()
		src := filepath.Join("testdata", "wordnet")
		entries, err := os.ReadDir(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		edit(dir)
		return dir
	}
	replaceLine := func(dir, name string, n int, text string) {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		lines[n-1] = text
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		dir  func(t *testing.T) string
		want []string
	}{
		{"missing dir", func(t *testing.T) string { return filepath.Join(t.TempDir(), "none") }, []string{"data.noun"}},
		{"missing file", func(t *testing.T) string {
			return copyDB(t, func(dir string) { os.Remove(filepath.Join(dir, "verb.exc")) })
		}, []string{"verb.exc"}},
		{"bad w_cnt", func(t *testing.T) string {
			return copyDB(t, func(dir string) {
				replaceLine(dir, "data.verb", 3, "00000162 35 v zz nick 0 001 | cut")
			})
		}, []string{"data.verb line 3", "w_cnt"}},
		{"truncated index line", func(t *testing.T) string {
			return copyDB(t, func(dir string) { replaceLine(dir, "index.verb", 4, "cut v 1") })
		}, []string{"index.verb line 4", "p_cnt"}},
		{"unknown synset", func(t *testing.T) string {
			return copyDB(t, func(dir string) {
				replaceLine(dir, "index.noun", 2, "child n 1 0 1 1 00000999")
			})
		}, []string{"index.noun line 2", "00000999"}},
		{"dangling pointer", func(t *testing.T) string {
			return copyDB(t, func(dir string) {
				replaceLine(dir, "data.adj", 2, "00000076 00 a 01 happy 0 001 & 00000999 a 0000 | x")
			})
		}, []string{"data.adj", "00000999"}},
		{"exception without lemma", func(t *testing.T) string {
			return copyDB(t, func(dir string) { replaceLine(dir, "noun.exc", 1, "children") })
		}, []string{"noun.exc line 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.dir(t))
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func loadDefault(tb testing.TB) *WordNet {
	tb.Helper()
	if _, err := os.Stat(filepath.Join(DefaultDir, "data.noun")); err != nil {
		tb.Fatalf("WordNet 3.0 database not found in %s (%v): install Debian's wordnet-base package (apt-get install wordnet-base)", DefaultDir, err)
	}
	w, err := Load(DefaultDir)
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

func TestRelatedWordNet(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	w := loadDefault(t)
	elapsed := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("Load: %v, heap kept %.1f MB", elapsed, float64(after.HeapAlloc-before.HeapAlloc)/(1<<20))

	tests := []struct {
		word    string
		want    []string
		notWant []string
	}{
		// WordNet 3.0 has no "nick" = steal sense (its verb senses are cut,
		// notch, dock a tail, mate), so "nicked" does not reach "steal".
		{"voucher", []string{"coupon"}, nil},
		{"nicked", []string{"snick", "chip"}, []string{"nick", "nicked", "breed"}},
		{"bought", []string{"buy", "purchase"}, []string{"bought"}},
		{"purchase", []string{"buy", "bought", "purchaser"}, nil},
		{"bike", []string{"bicycle", "motorcycle", "cycle"}, nil},
		{"bikes", []string{"bicycle"}, []string{"bike"}},
		{"kid", []string{"child", "children", "youngster"}, nil},
		{"children", []string{"child", "kid"}, []string{"children"}},
		{"broken", []string{"break", "interrupt"}, []string{"broken", "broke"}},
		{"stole", []string{"steal"}, []string{"stole", "stolen"}},
		{"car", []string{"automobile", "auto"}, nil},
		{"happy", []string{"felicitous", "glad"}, nil},
		{"geese", []string{"goose"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.word, func(t *testing.T) {
			got := related(w, tt.word)
			var words []string
			for i, r := range got {
				words = append(words, r.word)
				if r.w <= 0 || r.w > 1 {
					t.Errorf("%q has weight %v, want (0, 1]", r.word, r.w)
				}
				if i > 0 && r.w > got[i-1].w {
					t.Errorf("%q (%v) after %q (%v): not best first", r.word, r.w, got[i-1].word, got[i-1].w)
				}
				if slices.Contains(words[:i], r.word) {
					t.Errorf("%q yielded twice", r.word)
				}
			}
			if len(got) > MaxRelated {
				t.Errorf("%d words, want at most %d", len(got), MaxRelated)
			}
			for _, s := range tt.want {
				if !slices.Contains(words, s) {
					t.Errorf("Related(%q) = %v, missing %q", tt.word, words, s)
				}
			}
			for _, s := range tt.notWant {
				if slices.Contains(words, s) {
					t.Errorf("Related(%q) = %v, should not contain %q", tt.word, words, s)
				}
			}
		})
	}
}

func TestRelatedConcurrent(t *testing.T) {
	w, err := Load(filepath.Join("testdata", "wordnet"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []rel)
	for range 8 {
		go func() { done <- related(w, "stealer") }()
	}
	want := related(w, "stealer")
	for range 8 {
		if got := <-done; !slices.Equal(got, want) {
			t.Errorf("concurrent Related = %v, want %v", got, want)
		}
	}
}

func BenchmarkRelated(b *testing.B) {
	w := loadDefault(b)
	words := []string{"voucher", "nicked", "bought", "bikes", "kid", "broken", "running", "the", "zzzz"}
	n := 0
	visit := func(string, float64) { n++ }
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		w.Related(words[i%len(words)], visit)
	}
	if n == 0 {
		b.Fatal("no related words")
	}
}

func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, err := Load(DefaultDir); err != nil {
			b.Fatal(err)
		}
	}
}
