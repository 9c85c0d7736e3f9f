package encoder

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func checkUnit(t *testing.T, name string, v []float32) {
	t.Helper()
	if len(v) != dim1 {
		t.Fatalf("%s: %d dims, want %d", name, len(v), dim1)
	}
	var ss float64
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("%s: non-finite value", name)
		}
		ss += float64(x) * float64(x)
	}
	if math.Abs(ss-1) > 1e-5 {
		t.Errorf("%s: squared norm %v, want 1", name, ss)
	}
}

func TestEmbedAnyInput(t *testing.T) {
	e := testEncoder(t)
	rng := rand.New(rand.NewPCG(1, 2))
	binary := make([]byte, 1<<16)
	for i := range binary {
		binary[i] = byte(rng.UintN(256))
	}
	sentence := "The model reads the first one hundred and twenty-eight tokens of a text. "
	huge := strings.Repeat(sentence, 10<<20/len(sentence))
	tests := []struct {
		name string
		text string
		// same, if set, is a text that must embed to the same vector: the
		// model reads only the window.
		same string
	}{
		{"empty", "", ""},
		{"whitespace", " \t\n\r\u00a0\u3000", ""},
		{"invalid UTF-8", "abc\xff\xfe\xc3(def\xed\xa0\x80", ""},
		{"NUL bytes", "\x00\x00a\x00", ""},
		{"binary", string(binary), ""},
		{"10 MB of sentences", huge, strings.Repeat(sentence, 12)},
		{"10 MB without a space", strings.Repeat("x", 10<<20), ""},
		{"10 MB of emoji", strings.Repeat("😀", 10<<20/4), ""},
		{"10 MB of spaces", strings.Repeat(" ", 10<<20), strings.Repeat(" ", 200)},
		{"lone combining marks", strings.Repeat("\u0301", 1<<16), ""},
		{"expanding under NFKC", strings.Repeat("\ufdfa", 1<<16), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			got, err := e.Embed(context.Background(), []string{tt.text})
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			checkUnit(t, tt.name, got[0])
			if tt.same != "" {
				want, err := e.Embed(context.Background(), []string{tt.same})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got[0], want[0]) {
					t.Errorf("vector differs from that of the text's first window")
				}
			}
		})
	}
}

func TestTokensCountsWholeText(t *testing.T) {
	e := testEncoder(t)
	st := newTokState()
	one := "Passages are split by token counts."
	n1 := e.Tokens(one)
	if n1 == 0 || n1 != len(e.tok.encode(st, one, -1, -1)) {
		t.Fatalf("Tokens(%q) = %d", one, n1)
	}
	// Each repetition starts with "▁" (a token of its own boundary), so
	// the count scales exactly.
	for _, reps := range []int{1, 10, 1000, 100000} {
		text := strings.TrimSuffix(strings.Repeat(one+" ", reps), " ")
		if got := e.Tokens(text); got != reps*n1 {
			t.Errorf("%d repetitions: Tokens = %d, want %d", reps, got, reps*n1)
		}
	}
	if got := e.Tokens(""); got != 0 {
		t.Errorf("Tokens(\"\") = %d", got)
	}
	// Counting allocates nothing (Tokens takes its scratch from a pool).
	allocs := testing.AllocsPerRun(20, func() { e.tok.count(st, one) })
	if allocs != 0 {
		t.Errorf("counting tokens allocates %v times per call", allocs)
	}
}

// TestTokenizerRules checks the reference's rules on a small vocabulary.
func TestTokenizerRules(t *testing.T) {
	reserved := []string{"\ufffd", "<s>", "</s>", "x1", "x2", "x3"}
	pieces := append(slices.Clone(reserved), "▁", "▁ab", "a", "b", "c", "ab", "▁c", "b")
	//                                     6    7      8    9    10   11    12    13 (duplicate of 9)
	scores := []float64{0, 0, 0, 0, 0, 0, -1, -1, -2, -2, -2, -1.5, -1, -3}
	tk, err := newTokenizer(pieces, scores)
	if err != nil {
		t.Fatal(err)
	}
	st := newTokState()
	tests := []struct {
		text string
		want []int32
	}{
		{"", nil},
		{"ab", []int32{7}},                 // "▁ab" beats "▁"+"ab"
		{"ab ab", []int32{7, 7}},           // space becomes "▁"
		{"c", []int32{12}},                 // "▁c"
		{"ba", []int32{6, 13, 8}},          // duplicate "b": the later id wins
		{"ﬀ", []int32{6, 0}},               // NFKC "ff"; f is unknown, and unknowns merge
		{"zz yy", []int32{6, 0, 6, 0}},     // unknown runs merge, but not across "▁"
		{"a\u00a0b", []int32{6, 8, 6, 13}}, // NBSP is a space under NFKC
		{"\xff\xfe", []int32{6, 0}},        // invalid bytes are one unknown
	}
	for _, tt := range tests {
		got := tk.encode(st, tt.text, -1, -1)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q: got %v, want %v", tt.text, got, tt.want)
		}
	}
	if got := tk.encode(st, "ab ab ab", 2, -1); !slices.Equal(got, []int32{7, 7}) {
		t.Errorf("limit 2: got %v", got)
	}

	// A piece with "▁" inside spans words: the text is then segmented
	// whole, and "b▁c" wins over "▁ab" + "▁c".
	tk2, err := newTokenizer(append(slices.Clone(pieces), "b▁c"), append(slices.Clone(scores), 5))
	if err != nil {
		t.Fatal(err)
	}
	if tk2.segment {
		t.Fatal("vocabulary with b▁c: segment = true")
	}
	if got := tk2.encode(st, "ab c", -1, -1); !slices.Equal(got, []int32{6, 8, 14}) {
		t.Errorf("with b▁c: got %v, want [6 8 14]", got)
	}
}

func FuzzTokenizer(f *testing.F) {
	pieces, scores, err := loadVocab(testDir(f))
	if err != nil {
		f.Fatal(err)
	}
	tk, err := newTokenizer(pieces, scores)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", " ", "hello world", "ﬁle 😀 日本語", "a\tb\nc", "\xff\xfe", "10:30 :) ”5", "\u2581x\u2581"} {
		f.Add(s)
	}
	st := newTokState()
	f.Fuzz(func(t *testing.T, text string) {
		all := slices.Clone(tk.encode(st, text, -1, -1))
		for i, id := range all {
			if id < 0 || int(id) >= len(pieces) {
				t.Fatalf("id %d out of range", id)
			}
			if i > 0 && id == unknownID && all[i-1] == unknownID {
				t.Fatalf("unmerged unknown ids at %d", i)
			}
		}
		if n := tk.count(st, text); n != len(all) {
			t.Fatalf("count %d, encode %d ids", n, len(all))
		}
		cut := tk.encode(st, text, window, -1)
		if !slices.Equal(cut, all[:min(len(all), window)]) {
			t.Fatalf("ids within the window differ from the whole text's")
		}
	})
}
