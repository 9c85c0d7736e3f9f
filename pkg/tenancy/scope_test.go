package tenancy

import (
	"strings"
	"testing"
)

func TestParseScopes(t *testing.T) {
	tests := []struct {
		in   string
		want Scopes
		err  string
	}{
		{"content:read", ContentRead, ""},
		{"content:read,events:write", RuntimeScopes, ""},
		{" events:write  content:read ", RuntimeScopes, ""},
		{"content:read,content:write,events:read,events:write", AllScopes &^ ContentDraft, ""},
		{"content:draft,content:read,content:write,events:read,events:write", AllScopes, ""},
		{"content:read,content:draft,events:write", PreviewScopes, ""},
		{"content:read,content:read", ContentRead, ""},
		{"", 0, ""},
		{"content:admin", 0, `unknown scope "content:admin"; scopes are content:draft, content:read, content:write, events:read, events:write`},
		{"Content:Read", 0, `unknown scope "Content:Read"`},
		{"runtime", 0, `unknown scope "runtime"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseScopes(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseScopes(%q) error = %v, want %q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseScopes(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestScopesRoundTrip(t *testing.T) {
	for s := Scopes(0); s <= AllScopes; s++ {
		if got := StoredScopes(s.String()); got != s {
			t.Errorf("StoredScopes(%q) = %s, want %s", s.String(), got, s)
		}
		if got, err := ParseScopes(s.String()); err != nil || got != s {
			t.Errorf("ParseScopes(%q) = %s, %v", s.String(), got, err)
		}
	}
	if got := RuntimeScopes.String(); got != "content:read,events:write" {
		t.Errorf("RuntimeScopes = %q", got)
	}
	if RuntimeScopes.Has(ContentWrite) || RuntimeScopes.Has(EventsRead) || RuntimeScopes.Has(ContentDraft) {
		t.Error("a runtime token, which web pages carry, may write content, read events or read drafts")
	}
	if PreviewScopes.Has(ContentWrite) || PreviewScopes.Has(EventsRead) || PreviewScopes.String() != "content:draft,content:read,events:write" {
		t.Errorf("a preview token, which web pages carry, is %s", PreviewScopes)
	}
}

// TestStoredScopesSkipsUnknown: a scope a newer release wrote is not
// granted by this one, and does not cost the token the scopes known here.
func TestStoredScopesSkipsUnknown(t *testing.T) {
	if got := StoredScopes("content:read,billing:write, events:write"); got != RuntimeScopes {
		t.Errorf("StoredScopes = %s, want %s", got, RuntimeScopes)
	}
	if got := StoredScopes(""); got != 0 {
		t.Errorf("StoredScopes(\"\") = %s, want none", got)
	}
}
