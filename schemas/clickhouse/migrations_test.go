package clickhouse

import (
	"strings"
	"testing"

	"github.com/AfterShip/clickhouse-sql-parser/parser"
)

func TestFeaturesOf(t *testing.T) {
	cases := []struct {
		version string
		want    Features
	}{
		{"18.16.1", Features{LowCardinalitySetting: true}},
		{"19.9.2.4", Features{}},
		{"20.1.1", Features{DateTime64: true, Codecs: true, TTL: true, AddColumnIfNotExists: true}},
		{"23.8.16.40", Features{DateTime64: true, Codecs: true, TTL: true, AddColumnIfNotExists: true}},
	}
	for _, tc := range cases {
		v, err := ParseVersion(tc.version)
		if err != nil {
			t.Fatal(err)
		}
		if got := FeaturesOf(v); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.version, got, tc.want)
		}
	}
	for _, bad := range []string{"", "23", "x.y"} {
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) accepted", bad)
		}
	}
}

// TestModernDDLParses checks the statements rendered for current ClickHouse
// with a ClickHouse SQL parser; TestModernDDLRunsOnCurrentClickHouse runs
// them, since a parser accepts statements a server refuses.
func TestModernDDLParses(t *testing.T) {
	v, _ := ParseVersion("23.8.1")
	migs, err := Render(FeaturesOf(v), Options{Database: "analytics", RetentionDays: 400})
	if err != nil {
		t.Fatal(err)
	}
	if len(migs) == 0 {
		t.Fatal("no migrations")
	}
	all := ""
	for _, m := range migs {
		if _, err := parser.NewParser(m.SQL).ParseStmts(); err != nil {
			t.Errorf("migration %d (%s) does not parse: %v\n%s", m.Version, m.Name, err, m.SQL)
		}
		all += m.SQL + "\n"
	}
	for _, want := range []string{"DateTime64(3, 'UTC')", "CODEC(ZSTD(3))", "TTL toDateTime(event_time) + INTERVAL 400 DAY",
		"TTL toDateTime(received_at) + INTERVAL 400 DAY", "`analytics`.events", "ADD COLUMN IF NOT EXISTS kb_faqs UInt16",
		"`analytics`.quarantine"} {
		if !strings.Contains(all, want) {
			t.Errorf("modern DDL lacks %q", want)
		}
	}
}

func TestLegacyDDLAvoidsNewSyntax(t *testing.T) {
	v, _ := ParseVersion("18.16.1")
	migs, err := Render(FeaturesOf(v), Options{RetentionDays: 400})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migs {
		for _, banned := range []string{"DateTime64", "CODEC", "TTL", "--", "COLUMN IF NOT EXISTS"} {
			if strings.Contains(m.SQL, banned) {
				t.Errorf("migration %d for 18.16 contains %q", m.Version, banned)
			}
		}
		if _, err := parser.NewParser(m.SQL).ParseStmts(); err != nil {
			t.Errorf("migration %d does not parse: %v", m.Version, err)
		}
	}
	if migs[0].Version != 1 || !strings.Contains(migs[0].SQL, "`default`.events") {
		t.Errorf("first migration: %+v", migs[0])
	}
}

// TestStatements checks that a migration of several statements is run one
// statement at a time, each complete.
func TestStatements(t *testing.T) {
	for _, f := range []Features{FeaturesOf(Version{18, 16}), FeaturesOf(Version{23, 8})} {
		migs, err := Render(f, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range migs {
			if len(m.Statements) == 0 {
				t.Errorf("migration %d has no statements", m.Version)
			}
			for _, st := range m.Statements {
				if strings.HasSuffix(st, ";") || strings.Count(st, "ALTER TABLE") > 1 {
					t.Errorf("migration %d: statement not split: %q", m.Version, st)
				}
				if _, err := parser.NewParser(st).ParseStmts(); err != nil {
					t.Errorf("migration %d: statement does not parse: %v\n%s", m.Version, err, st)
				}
			}
			if m.Name == "event_types" && len(m.Statements) != 7 {
				t.Errorf("migration %d has %d statements, want one per new column (7)", m.Version, len(m.Statements))
			}
		}
	}
}
