package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendStringEscapes(t *testing.T) {
	cases := map[string]string{
		"plain":          `"plain"`,
		"q\"b\\":         `"q\"b\\"`,
		"\n\r\t\x01\x1f": `"\n\r\t\u0001\u001f"`,
		"é\u2028":        "\"é\u2028\"",
		"bad\xffutf":     `"bad\ufffdutf"`,
	}
	for in, want := range cases {
		if got := string(AppendString(nil, []byte(in))); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", in, got, want)
		}
		if !json.Valid(AppendString(nil, []byte(in))) {
			t.Errorf("AppendString(%q) is not valid JSON", in)
		}
	}
}

func TestAppendStringEveryPosition(t *testing.T) {
	for _, special := range []string{"\"", "\\", "\x00", "\x1f", "\n", "é", "\u2028", "\x7f"} {
		for pos := 0; pos <= 20; pos++ {
			in := strings.Repeat("a", pos) + special + strings.Repeat("b", 20-pos)
			out := AppendString(nil, []byte(in))
			var back string
			if err := json.Unmarshal(out, &back); err != nil || back != in {
				t.Fatalf("AppendString(%q) = %s, reads back %q (%v)", in, out, back, err)
			}
		}
	}
}

// FuzzAppendString: whatever the bytes, the result is a JSON string that
// reads back as them, invalid UTF-8 replaced.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\", "\n\x01é\u2028", "bad\xffutf", "\xed\xa0\x80"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		out := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s, not a JSON string: %v", s, out, err)
		}
		if want := replaceInvalid(s); back != want {
			t.Fatalf("AppendString(%q) reads back %q, want %q", s, back, want)
		}
	})
}

// replaceInvalid replaces each byte of s that is not part of valid UTF-8
// with U+FFFD.
func replaceInvalid(s []byte) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRune(s[i:])
		b.WriteRune(r) // utf8.RuneError for an invalid byte, n being 1
		i += n
	}
	return b.String()
}
