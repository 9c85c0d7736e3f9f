package encoder

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestPortableKernel runs the model on the portable microkernel, which
// machines without AVX2 and FMA use, and holds it to the reference and to
// the kernel of this machine.
func TestPortableKernel(t *testing.T) {
	e := testEncoder(t)
	portable := newEncoder(e.tok, e.w, kernelGo, softmaxGo)
	var texts, vecs []string
	for _, s := range loadParity(t) {
		// Short sentences keep the test quick under the race detector.
		if len(s.IDs) <= 24 {
			texts = append(texts, s.Text)
			vecs = append(vecs, s.Vector)
		}
	}
	got, err := portable.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	best, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	maxDiff := 0.0
	for i := range texts {
		if c := cosine(got[i], decodeVector(t, vecs[i])); !(c >= 0.9999) {
			t.Errorf("%.40q: cosine %.7f to the reference", texts[i], c)
		}
		for j := range got[i] {
			maxDiff = max(maxDiff, math.Abs(float64(got[i][j]-best[i][j])))
		}
	}
	if maxDiff > 1e-5 {
		t.Errorf("portable and assembly kernels differ by up to %.3g", maxDiff)
	}
	t.Logf("%d sentences: portable and assembly kernels differ by up to %.3g", len(texts), maxDiff)
}

// TestEmbedBatchEqualsSingle checks that packing texts together and
// spreading them over workers does not change any vector, to the bit: each
// element is computed by the same operations in the same order.
func TestEmbedBatchEqualsSingle(t *testing.T) {
	e := testEncoder(t)
	texts := []string{"", "short", strings.Repeat("a long text that fills the window ", 40), "x", "", "What is the capital of France?"}
	for i := 0; i < 40; i++ {
		texts = append(texts, strings.Repeat("word ", i))
	}
	// More texts without tokens than a group has rows.
	for i := 0; i < 2*maxRows; i++ {
		texts = append(texts, "")
	}
	texts = append(texts, "last")
	batch, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	single := map[string][]float32{}
	for i, text := range texts {
		if v, ok := single[text]; ok {
			if !slices.Equal(v, batch[i]) {
				t.Errorf("text %d: vector differs from that of the same text in the same batch", i)
			}
			continue
		}
		one, err := e.Embed(context.Background(), []string{text})
		if err != nil {
			t.Fatal(err)
		}
		single[text] = one[0]
		if !slices.Equal(one[0], batch[i]) {
			t.Errorf("text %d: vector differs alone and in a batch (cosine %.8f)", i, cosine(one[0], batch[i]))
		}
	}
}

// TestEmbedConcurrent embeds from several goroutines at once; with -race it
// checks that workers share nothing.
func TestEmbedConcurrent(t *testing.T) {
	e := testEncoder(t)
	texts := []string{"one text", "another text", "", strings.Repeat("long ", 200)}
	want, err := e.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := e.Embed(context.Background(), texts)
			if err != nil {
				errs <- err
				return
			}
			for i := range got {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("goroutine %d, text %d: vector differs", g, i)
				}
			}
			e.Tokens(texts[3])
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestEmbedAllocations checks that tokenizing and the forward pass, with
// a worker's scratch space, allocate nothing, whatever the length of the
// text. (Embed itself allocates the result and takes a worker from a pool.)
func TestEmbedAllocations(t *testing.T) {
	e := testEncoder(t)
	wk := newWorker(bestKernel(), bestSoftmax())
	dst := make([]float32, dim1)
	for _, text := range []string{"hello", strings.Repeat("tokens of a long passage ", 30), strings.Repeat("x", 100000)} {
		allocs := testing.AllocsPerRun(5, func() {
			ids := e.tok.encode(wk.tok, text, window, MaxRunes)
			wk.add(ids, dst)
			e.forward(wk)
		})
		if allocs != 0 {
			t.Errorf("%d bytes of text: %v allocations per text", len(text), allocs)
		}
	}
}

func TestAccessors(t *testing.T) {
	e := testEncoder(t)
	if e.Model() != "use-lite-en-0.2.0" || e.Dims() != 512 || e.Window() != 128 {
		t.Errorf("Model, Dims, Window = %q, %d, %d", e.Model(), e.Dims(), e.Window())
	}
	got, err := e.Embed(context.Background(), nil)
	if err != nil || len(got) != 0 {
		t.Errorf("Embed(nil) = %v, %v", got, err)
	}
}
