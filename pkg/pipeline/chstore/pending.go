package chstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// Pending returns the versions of the migrations this build has that the
// database does not record as applied, in order. A database never
// migrated (no migrations table yet) has all of them pending.
func (s *Store) Pending(ctx context.Context) ([]int, error) {
	migs, err := chschema.Render(s.features, s.schemaOptions())
	if err != nil {
		return nil, err
	}
	done, err := s.AppliedVersions(ctx)
	if err != nil {
		if !missingTable(err) {
			return nil, err
		}
		done = map[int]bool{}
	}
	var pending []int
	for _, m := range migs {
		if !done[m.Version] {
			pending = append(pending, m.Version)
		}
	}
	return pending, nil
}

// WaitMigrated returns once every migration of this build is applied,
// checking every interval, for deployments where a separate step
// ("consumer migrate", a Kubernetes Job) applies the schema. Each check
// that finds migrations missing is passed to waiting.
func (s *Store) WaitMigrated(ctx context.Context, interval time.Duration, waiting func(pending []int)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pending, err := s.Pending(ctx)
		if err != nil {
			return fmt.Errorf("check the ClickHouse schema: %w", err)
		}
		if len(pending) == 0 {
			return nil
		}
		waiting(pending)
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for ClickHouse migrations %v to be applied: %w", pending, ctx.Err())
		case <-t.C:
		}
	}
}

// missingTable reports ClickHouse's "table doesn't exist" (code 60) or
// "database doesn't exist" (code 81).
func missingTable(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && (ex.Code == 60 || ex.Code == 81)
}
