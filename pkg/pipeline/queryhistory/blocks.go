package queryhistory

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/assistantcms/cms/pkg/pipeline/chstore"
	chschema "github.com/assistantcms/cms/schemas/clickhouse"
)

// SuggestionBlock is a text operators keep out of an app's HISTORICAL
// suggestions.
type SuggestionBlock struct {
	AppID string
	// Channel is the channel the block holds on; "" is every channel of
	// the app.
	Channel string
	// Query is the text in normal form (see chschema.NormalizeQuery), as
	// suggestions are counted.
	Query string
	// ChangedAt is when it was blocked.
	ChangedAt time.Time
}

// MaxBlockedQueryBytes bounds the text of a block: longer text is never a
// suggestion worth keeping out by hand, and the list is read with every
// refresh of every channel's suggestions.
const MaxBlockedQueryBytes = 1024

// BlockSuggestion keeps query (normalised first) out of the app's
// HISTORICAL suggestions on channel ("" for every channel), or, with
// blocked false, lets it back. It returns the block as written. The api
// sees it when it next reads the channel's suggestions (HISTORY_REFRESH).
//
// Blocks are rows of suggestion_blocks, the latest per app, channel and
// query deciding. On a cluster they are written to the connected
// server's shard-local table and read through the Distributed one.
func BlockSuggestion(ctx context.Context, s *chstore.Store, appID, channel, query string, blocked bool) (SuggestionBlock, error) {
	b := SuggestionBlock{AppID: appID, Channel: channel, Query: chschema.NormalizeQuery(query)}
	switch {
	case !utf8.ValidString(query):
		return b, errors.New("block a suggestion: the query is not valid UTF-8")
	case appID == "":
		return b, errors.New("block a suggestion: want an app ID")
	case b.Query == "":
		return b, errors.New("block a suggestion: want the text of the query")
	case len(b.Query) > MaxBlockedQueryBytes:
		return b, fmt.Errorf("block a suggestion: the query is %d bytes; at most %d are allowed", len(b.Query), MaxBlockedQueryBytes)
	}
	now := time.Now().UTC()
	b.ChangedAt = now.Truncate(time.Second)
	ctx = s.Context(ctx)
	batch, err := s.Conn().PrepareBatch(ctx, "INSERT INTO "+s.LocalTable("suggestion_blocks")+" (app_id, channel, query, blocked, version, changed_at)")
	if err != nil {
		return b, fmt.Errorf("prepare the block of %q in app %s: %w", b.Query, appID, err)
	}
	// The version orders the changes of one text; nanoseconds keep a
	// block and an unblock in the same second apart.
	if err := batch.Append(appID, channel, b.Query, blockedByte(blocked), uint64(now.UnixNano()), b.ChangedAt); err != nil {
		_ = batch.Abort()
		return b, fmt.Errorf("encode the block of %q in app %s: %w", b.Query, appID, err)
	}
	if err := batch.Send(); err != nil {
		return b, fmt.Errorf("write the block of %q in app %s: %w", b.Query, appID, err)
	}
	return b, nil
}

// BlockedSuggestions lists the texts blocked now, of one app or, with an
// empty appID, of every app, by app, channel and text.
func BlockedSuggestions(ctx context.Context, s *chstore.Store, appID string) ([]SuggestionBlock, error) {
	where, args := "", []any{}
	if appID != "" {
		where, args = "WHERE app_id = ? ", append(args, appID)
	}
	rows, err := s.Conn().Query(s.Context(ctx), "SELECT app_id, channel, query, argMax(changed_at, version) FROM "+s.Table("suggestion_blocks")+" "+
		where+"GROUP BY app_id, channel, query HAVING argMax(blocked, version) = 1 ORDER BY app_id, channel, query", args...)
	if err != nil {
		return nil, fmt.Errorf("read the blocked suggestions: %w", err)
	}
	defer rows.Close()
	var out []SuggestionBlock
	for rows.Next() {
		var b SuggestionBlock
		if err := rows.Scan(&b.AppID, &b.Channel, &b.Query, &b.ChangedAt); err != nil {
			return nil, fmt.Errorf("read the blocked suggestions: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the blocked suggestions: %w", err)
	}
	return out, nil
}

// blockedByte is blocked as suggestion_blocks.blocked holds it.
func blockedByte(blocked bool) uint8 {
	if blocked {
		return 1
	}
	return 0
}
