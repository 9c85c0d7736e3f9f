package gapgroup

import (
	"context"
	"fmt"
	"testing"
)

// manyWordings makes n distinct wordings from the labelled ones, with
// openings and endings people type.
func manyWordings(t testing.TB, n int) []string {
	texts, _ := labelled(t)
	var out []string
	for _, pre := range []string{"", "hi ", "hello, ", "ok ", "hey ", "so ", "um ", "please, ", "quick question: ", "i wonder, ", "tell me "} {
		for _, post := range []string{"", " please", " thanks", " ?", " now", " today", " again", " asap"} {
			for _, w := range texts {
				if len(out) == n {
					return out
				}
				out = append(out, pre+w+post)
			}
		}
	}
	t.Fatalf("only %d wordings", len(out))
	return nil
}

// BenchmarkGroup groups n wordings whose vectors are known: what the gap
// inbox does once the vectors are cached.
func BenchmarkGroup(b *testing.B) {
	e := testEncoder(b)
	all := manyWordings(b, 20000)
	vectors, err := e.Embed(context.Background(), all)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1000, 5000, 10000, 20000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var groups int
			for b.Loop() {
				g, err := ByMeaning(vectors[:n], nil, DefaultThreshold)
				if err != nil {
					b.Fatal(err)
				}
				groups = len(g)
			}
			b.ReportMetric(float64(groups), "groups")
		})
	}
}

// BenchmarkGroupApart is the worst case of BenchmarkGroup: no wording
// joins another, so each is compared with every leader before it.
func BenchmarkGroupApart(b *testing.B) {
	e := testEncoder(b)
	vectors, err := e.Embed(context.Background(), manyWordings(b, 5000))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if g, err := ByMeaning(vectors, nil, 1.01); err != nil || len(g) != len(vectors) {
			b.Fatalf("%d groups, %v", len(g), err)
		}
	}
}

// BenchmarkEmbedAndGroup embeds 5,000 wordings with the built-in encoder
// and groups them: the inbox's cost when no vector is cached.
func BenchmarkEmbedAndGroup(b *testing.B) {
	e := testEncoder(b)
	texts := manyWordings(b, 5000)
	for b.Loop() {
		vectors, err := e.Embed(context.Background(), texts)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ByMeaning(vectors, nil, DefaultThreshold); err != nil {
			b.Fatal(err)
		}
	}
}
