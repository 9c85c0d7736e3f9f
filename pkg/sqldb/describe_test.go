package sqldb

import "testing"

func TestDescribeHidesCredentials(t *testing.T) {
	for dsn, want := range map[string]string{
		"cms.db":                          "cms.db",
		"/var/lib/cms/cms.db":             "/var/lib/cms/cms.db",
		"postgres://u:s3cret@db:5432/cms": "postgres://db:5432/cms",
		"postgresql://u@db/cms?sslmode=require&password=x": "postgres://db/cms",
		"postgres://db/cms":        "postgres://db/cms",
		"postgres://u:p@ss@db/cms": "postgres://db/cms",
	} {
		if got := Describe(dsn); got != want {
			t.Errorf("Describe(%q) = %q, want %q", dsn, got, want)
		}
	}
}

func TestIsPostgres(t *testing.T) {
	for dsn, want := range map[string]bool{
		"cms.db": false, "/data/cms.db": false, "file:cms.db?mode=ro": false,
		"postgres://db/cms": true, "postgresql://db/cms": true,
		"host=db dbname=cms": true, "dbname=cms": true,
	} {
		if got := IsPostgres(dsn); got != want {
			t.Errorf("IsPostgres(%q) = %v, want %v", dsn, got, want)
		}
	}
}
