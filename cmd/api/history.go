package main

import (
	"context"

	"github.com/assistantcms/cms/pkg/content/knowledge"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	"github.com/assistantcms/cms/pkg/pipeline/queryhistory"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// clickHouseHistory is the content API's History (contentapi.History)
// read from ClickHouse's query_sources: queries enough distinct users,
// sessions and sources (tokens and client networks, as the server saw
// them) asked within a window of days, never text that looks like
// personal data or that an operator blocked. It connects on first use and
// again after a failure, so the api starts and serves while ClickHouse is
// down. A block shows when the api's cache reads the channel again
// (contentapi.Config.HistoryRefresh).
//
// It lives here, where the api is assembled, so that neither the content
// API nor the pipeline's store imports the other.
type clickHouseHistory struct {
	conn  *chstore.Reconnecting
	rules queryhistory.Suggestable
}

// newClickHouseHistory returns a History reading the database in cfg,
// suggesting the queries rules allow; a zero field of rules takes its
// default: queryhistory.DefaultMinUsers users, as many sessions and sources,
// over the schema's default days.
func newClickHouseHistory(cfg chstore.Config, rules queryhistory.Suggestable) *clickHouseHistory {
	if rules.MinUsers == 0 {
		rules.MinUsers = queryhistory.DefaultMinUsers
	}
	if rules.Days == 0 {
		rules.Days = chschema.DefaultHistoryDays
	}
	return &clickHouseHistory{conn: chstore.NewReconnecting(cfg), rules: rules}
}

// TopQueries implements contentapi.History.
func (h *clickHouseHistory) TopQueries(ctx context.Context, appID, channel string, limit int) ([]knowledge.QueryCount, error) {
	var qs []queryhistory.QueryCount
	if err := h.conn.Do(ctx, func(s *chstore.Store) (err error) {
		qs, err = queryhistory.TopQueries(ctx, s, appID, channel, limit, h.rules)
		return err
	}); err != nil {
		return nil, err
	}
	out := make([]knowledge.QueryCount, len(qs))
	for i, q := range qs {
		out[i] = knowledge.QueryCount{Query: q.Query, Asked: q.Asked}
	}
	return out, nil
}

// Close releases the connection.
func (h *clickHouseHistory) Close() error { return h.conn.Close() }
