package encoder

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// testDir is the model directory of the tests: $ENCODER_DIR, else where
// Locate finds it. A missing model fails the test: parity is the point.
func testDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("ENCODER_DIR")
	if dir == "" {
		dir, _ = Locate()
	}
	if _, err := os.Stat(filepath.Join(dir, modelFile)); err != nil {
		t.Fatalf("model files missing (%v): install them with deploy/install-encoder %s "+
			"(the project's test command, go run ./dev/test, does), "+
			"or point ENCODER_DIR at a directory holding them", err, dir)
	}
	return dir
}

func testEncoder(t testing.TB) *Encoder {
	t.Helper()
	e, err := Load(testDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type paritySentence struct {
	Text   string  `json:"text"`
	IDs    []int32 `json:"ids"`
	Vector string  `json:"vector"`
}

func loadParity(t testing.TB) []paritySentence {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "parity.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Sentences []paritySentence `json:"sentences"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("testdata/parity.json: %v", err)
	}
	if len(doc.Sentences) < 30 {
		t.Fatalf("testdata/parity.json has %d sentences, want at least 30", len(doc.Sentences))
	}
	return doc.Sentences
}

func decodeVector(t testing.TB, s string) []float32 {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != 4*dim1 {
		t.Fatalf("fixture vector: %d bytes, err %v", len(b), err)
	}
	v := make([]float32, dim1)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

func TestTokenizerMatchesReference(t *testing.T) {
	e := testEncoder(t)
	st := newTokState()
	for _, s := range loadParity(t) {
		got := e.tok.encode(st, s.Text, -1, -1)
		if !slices.Equal(got, s.IDs) {
			t.Errorf("%.40q: ids\n got %v\nwant %v", s.Text, got, s.IDs)
		}
		if n := e.Tokens(s.Text); n != len(s.IDs) {
			t.Errorf("%.40q: Tokens = %d, want %d", s.Text, n, len(s.IDs))
		}
		cut := e.tok.encode(st, s.Text, window, MaxRunes)
		if want := s.IDs[:min(len(s.IDs), window)]; !slices.Equal(cut, want) {
			t.Errorf("%.40q: ids within the window differ", s.Text)
		}
	}
}

func TestEmbedMatchesReference(t *testing.T) {
	e := testEncoder(t)
	sentences := loadParity(t)
	texts := make([]string, len(sentences))
	for i, s := range sentences {
		texts[i] = s.Text
	}
	check := func(t *testing.T, got [][]float32) {
		minCos, maxDiff := 1.0, 0.0
		for i, s := range sentences {
			want := decodeVector(t, s.Vector)
			c := cosine(got[i], want)
			for j := range want {
				maxDiff = max(maxDiff, math.Abs(float64(got[i][j]-want[j])))
			}
			minCos = min(minCos, c)
			if !(c >= 0.9999) {
				t.Errorf("%.40q (%d tokens): cosine %.7f to the reference, want >= 0.9999", s.Text, len(s.IDs), c)
			}
		}
		t.Logf("%d sentences: min cosine %.9f, max abs diff %.3g", len(sentences), minCos, maxDiff)
	}
	t.Run("one call", func(t *testing.T) {
		got, err := e.Embed(context.Background(), texts)
		if err != nil {
			t.Fatal(err)
		}
		check(t, got)
	})
	t.Run("one text per call", func(t *testing.T) {
		got := make([][]float32, len(texts))
		for i, text := range texts {
			v, err := e.Embed(context.Background(), []string{text})
			if err != nil {
				t.Fatal(err)
			}
			got[i] = v[0]
		}
		check(t, got)
	})
}

func TestEmbedCanceled(t *testing.T) {
	e := testEncoder(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.Embed(ctx, []string{"a", "b"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Embed with a canceled context: err = %v, want context.Canceled", err)
	}
}
