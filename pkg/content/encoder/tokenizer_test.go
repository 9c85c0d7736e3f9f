package encoder

import (
	"fmt"
	"testing"
)

// TestTrieFindsEveryPiece reads back every piece of a vocabulary whose
// nodes have from one to dozens of children, each with its id.
func TestTrieFindsEveryPiece(t *testing.T) {
	var pieces []string
	for i := range 6 {
		pieces = append(pieces, fmt.Sprint("r", i))
	}
	for _, a := range "abcdefghijklmnop" {
		for _, b := range "abcdefghijklmnopqrstuvwxyz" {
			pieces = append(pieces, string([]rune{a, b}), string([]rune{'▁', a, b}))
		}
	}
	tr := newTrie(pieces)
	for i := 6; i < len(pieces); i++ {
		node := int32(0)
		for _, r := range pieces[i] {
			node = tr.next(node, r)
			if node < 0 {
				t.Fatalf("%q: missing", pieces[i])
			}
		}
		if tr.id[node] != int32(i) {
			t.Errorf("%q: id %d", pieces[i], tr.id[node])
		}
	}
}
