package clickhouse

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
		// Appended after other text, the normal form is the same.
		if got := string(AppendNormalQuery([]byte("x"), tc.in)); got != "x"+tc.want {
			t.Errorf("AppendNormalQuery(%q) = %q, want %q", tc.in, got, "x"+tc.want)
		}
		// The ASCII path and the one for any text agree.
		if got := string(appendNormalRunes([]byte("x"), tc.in)); got != "x"+tc.want {
			t.Errorf("appendNormalRunes(%q) = %q, want %q", tc.in, got, "x"+tc.want)
		}
	}
}

func TestIsNormalQuery(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"", true},
		{"where is my order", true},
		{"1 2 3?", true},
		{"Where is my order", false},
		{" where", false},
		{"where ", false},
		{"where  is", false},
		{"where\tis", false},
		{"été", false}, // normal, but beyond ASCII: not checked
	} {
		if got := IsNormalQuery(tc.in); got != tc.want {
			t.Errorf("IsNormalQuery(%q) = %v, want %v", tc.in, got, tc.want)
		}
		if tc.want && NormalizeQuery(tc.in) != tc.in {
			t.Errorf("%q is reported normal but normalises to %q", tc.in, NormalizeQuery(tc.in))
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
