package clickhouse

import "testing"

func TestIsPrivate(t *testing.T) {
	cases := []struct {
		query   string
		private bool
	}{
		{"where is my order", false},
		{"order 12345", false}, // five digits: not long
		{"opening hours on 24 december", false},
		{"what's new? e.g. prices", false},
		{"my email is john.doe@example.com", true},
		{"jo@localhost", true},
		{"order 123456", true},
		{"card 4111111111111111", true},
		{"call me on +44 20 7946 0958", true},
		{"555-123-4567", true},
		{"(555) 123 4567", true},
		{"see https://shop.example/p?id=1", true},
		{"ftp://files", true},
		{"go to www.shop", true},
		{"is example.org down", true},
		{"mail.google.com", true},
	}
	for _, tc := range cases {
		if got := IsPrivate(tc.query); got != tc.private {
			t.Errorf("IsPrivate(%q) = %v, want %v", tc.query, got, tc.private)
		}
	}
}
