// Package analyticsdoc reads the analysts' queries out of
// docs/analytics.md, so that tests run exactly what the page documents,
// and scans their answers whatever their columns.
package analyticsdoc

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// sqlBlock is a section's heading and the first SQL block under it.
var sqlBlock = regexp.MustCompile("(?s)^([^\n]+)\n.*?```sql\n(.*?)```")

// Queries returns the SQL of every second-level section of the Markdown
// file at path that holds an SQL block, by the section's heading.
func Queries(path string) (map[string]string, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the analysts' queries: %w", err)
	}
	return Parse(string(doc)), nil
}

// Parse is Queries over the text of a document.
func Parse(doc string) map[string]string {
	out := map[string]string{}
	for _, section := range strings.Split(doc, "\n## ")[1:] {
		if m := sqlBlock.FindStringSubmatch(section); m != nil {
			out[m[1]] = m[2]
		}
	}
	return out
}

// Query runs sql on conn and scans its answer as Scan does.
func Query(ctx context.Context, conn driver.Conn, sql string) (names []string, values [][]any, err error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, nil, fmt.Errorf("query: %w\n%s", err, sql)
	}
	defer rows.Close()
	return Scan(rows)
}

// Scan reads every row of rows as values of the column types' own Go
// types, pointers followed (a NULL stays a nil pointer), with the column
// names.
func Scan(rows driver.Rows) (names []string, out [][]any, err error) {
	names, types := rows.Columns(), rows.ColumnTypes()
	for rows.Next() {
		dest := make([]any, len(types))
		for i, ct := range types {
			dest[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, fmt.Errorf("scan a row: %w", err)
		}
		row := make([]any, len(dest))
		for i, d := range dest {
			v := reflect.ValueOf(d).Elem()
			for v.Kind() == reflect.Pointer && !v.IsNil() {
				v = v.Elem()
			}
			row[i] = v.Interface()
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read the rows: %w", err)
	}
	return names, out, nil
}
