package modernch

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestSessionExecutesQueriesAndInserts(t *testing.T) {
	s := OpenForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !strings.HasPrefix(s.Version, "26.") {
		t.Errorf("engine version %q, want 26.x", s.Version)
	}
	if err := s.Exec(ctx, "CREATE TABLE t (id UInt32, name LowCardinality(String), at DateTime64(3, 'UTC') CODEC(ZSTD(3))) ENGINE = MergeTree ORDER BY id TTL toDateTime(at) + INTERVAL 1 DAY"); err != nil {
		t.Fatal(err)
	}
	n, err := s.Insert(ctx, "t", []string{"id", "name", "at"}, "JSONEachRow",
		[]byte(`{"id":2,"name":"b","at":"2030-01-02 03:04:05.678"}`+"\n"+`{"id":1,"name":"a\nline","at":"2030-01-01 00:00:00.000"}`+"\n"))
	if err != nil || n != 2 {
		t.Fatalf("insert: %d rows, %v", n, err)
	}
	res, err := s.Query(ctx, "SELECT id, name, at, [id, id] AS ids, CAST(NULL AS Nullable(Float32)) AS none FROM t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	cols := []Column{{"id", "UInt32"}, {"name", "LowCardinality(String)"}, {"at", "DateTime64(3, 'UTC')"}, {"ids", "Array(UInt32)"}, {"none", "Nullable(Float32)"}}
	if len(res.Columns) != len(cols) {
		t.Fatalf("columns %v", res.Columns)
	}
	for i, c := range cols {
		if res.Columns[i] != c {
			t.Errorf("column %d: %v, want %v", i, res.Columns[i], c)
		}
	}
	if len(res.Rows) != 2 {
		t.Fatalf("rows %v", res.Rows)
	}
	if r := res.Rows[0]; r[1] != "a\nline" || r[2] != "2030-01-01 00:00:00.000" || r[4] != nil {
		t.Errorf("first row %#v", r)
	}
	if ids, ok := res.Rows[1][3].([]any); !ok || len(ids) != 2 {
		t.Errorf("second row's array %#v", res.Rows[1][3])
	}

	// The session keeps working after a refused statement, which says why.
	err = s.Exec(ctx, "SELEC 1")
	var refused *Error
	if !errors.As(err, &refused) || refused.Code != 62 || !strings.Contains(refused.Message, "SYNTAX_ERROR") {
		t.Fatalf("a syntax error gave %v", err)
	}
	if res, err := s.Query(ctx, "SELECT count() FROM t"); err != nil || len(res.Rows) != 1 {
		t.Fatalf("after a refused statement: %v %v", res, err)
	}
}

func TestSessionAbandonedByItsContext(t *testing.T) {
	s := OpenForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// Long enough to outlast the context by far.
	_, err := s.Query(ctx, "SELECT count() FROM numbers(100000000000) WHERE sleepEachRow(0) = 0")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a query outliving its context gave %v", err)
	}
	if err := s.Exec(context.Background(), "SELECT 1"); err == nil {
		t.Fatal("an abandoned session still answers")
	}
}

func TestPackageJSONPinsTheTestedVersion(t *testing.T) {
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"chdb": "`+ChdbVersion+`"`) {
			t.Errorf("%s does not pin chdb %s", f, ChdbVersion)
		}
	}
}
