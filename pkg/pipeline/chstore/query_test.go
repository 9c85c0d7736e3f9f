package chstore

import "testing"

func TestNormalizeQuery(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"where is my order", "where is my order"},
		{"Where is my order", "where is my order"},
		{"  where   is\tmy\n order  ", "where is my order"},
		{" ", ""},
		{"\t\n", ""},
		{"x", "x"},
		{"X ", "x"},
		{"ÉTÉ à Paris", "été à paris"},
		{"Straße\u00a0Nord", "straße nord"}, // no-break space is white space
		{"ÖL\u3000und Gas", "öl und gas"},   // ideographic space
		{"a\vb", "a b"},
		{"1 2 3?", "1 2 3?"},
		{"Can I book\r\nit (REF 42)\f", "can i book it (ref 42)"},
	} {
		if got := NormalizeQuery(tc.in); got != tc.want {
			t.Errorf("NormalizeQuery(%q) = %q, want %q", tc.in, got, tc.want)
		}
		// The ASCII path and the one for any text agree.
		if got := string(appendNormalizedRunes([]byte("x"), tc.in)); got != "x"+tc.want {
			t.Errorf("appendNormalizedRunes(%q) = %q, want %q", tc.in, got, "x"+tc.want)
		}
	}
}

func TestNormalizeQueryKeepsNormalInput(t *testing.T) {
	in := "where is my order"
	if n := testing.AllocsPerRun(100, func() { _ = NormalizeQuery(in) }); n != 0 {
		t.Errorf("NormalizeQuery of a normal query allocated %v times", n)
	}
	// Normalising twice changes nothing.
	for _, s := range []string{"  A  b ", "ÉTÉ\t\tX", "a"} {
		once := NormalizeQuery(s)
		if twice := NormalizeQuery(once); twice != once {
			t.Errorf("NormalizeQuery is not idempotent on %q: %q then %q", s, once, twice)
		}
	}
}
